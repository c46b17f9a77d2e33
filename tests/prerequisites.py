"""What a test needs from the machine (Docker, Chromium, a built pyz).

One rule for all of them: outside CI a missing prerequisite skips with a printed reason;
under CI (`SKALD_CI` set by ci/test.sh, which installs everything) it is a failure.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NoReturn

import pytest


def unavailable(reason: str) -> NoReturn:
    if os.environ.get("SKALD_CI"):
        pytest.fail(f"{reason} (SKALD_CI is set: this must run, not skip)")
    print(f"skipping: {reason}")
    pytest.skip(reason)


def built_pyz(variable: str = "SKALD_TEST_PYZ", what: str = "ci/build.sh") -> Path:
    """The zipapp ci/test.sh built, from the environment variable that names it."""
    value = os.environ.get(variable)
    if not value:
        unavailable(f"{variable} is not set: build it with {what} and set {variable}")
    path = Path(value).resolve()
    if not path.is_file():
        pytest.fail(f"{variable}={value} does not exist or is not a file")
    return path


@pytest.fixture(scope="module", name="built_pyz")
def built_pyz_fixture() -> Path:
    """The `built_pyz` fixture of the modules that import it: the zipapp, once a module."""
    return built_pyz()
