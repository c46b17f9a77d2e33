"""What a test needs from the machine (Docker, Chromium, a built pyz).

One rule for all of them: outside CI a missing prerequisite skips with a printed reason;
under CI (`SKALD_CI` set by ci/test.sh, which installs everything) it is a failure.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def unavailable(reason: str) -> NoReturn:
    if os.environ.get("SKALD_CI"):
        pytest.fail(f"{reason} (SKALD_CI is set: this must run, not skip)")
    print(f"skipping: {reason}")
    pytest.skip(reason)
