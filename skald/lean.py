"""httpx and structlog, imported without the command-line extras they load on their own.

Rule: the entry points (`skald.cli`, `skald.server`) import this module before anything
else of Skald's. `httpx` imports its command-line client (`httpx._main`: click, rich,
pygments) whenever those are installed, and `structlog` imports `structlog.dev`, which
imports rich for the console renderer's tracebacks; Litestar installs rich and click,
so every start paid for all three (about a tenth of a cold start) and used none: Skald
has no httpx command line, and its logging turns tracebacks into text
(`format_exc_info`) before the renderer sees them. So they are hidden from the
import system while httpx and structlog load (`import rich` raises ImportError, which
both catch), and put back at once. greenlet likewise: structlog's deprecated
`threadlocal` module (which Skald does not use: its log context is contextvars) takes it
when it is importable, and greenlet is C++, so it loads libstdc++ too (about 0.9 MiB of
memory at rest, bench/README.md goal 5). Skald does not depend on it; Playwright, a test
tool, installs it beside Skald in a developer's environment.

Trap: this works only if nothing imported httpx or structlog before (a test run's
conftest does; then nothing changes, which is harmless). Whoever imports rich, click,
pygments or greenlet later gets the real module: they are hidden only during these two
imports.
`httpx.main` is then httpx's stub that says the extras are missing.

PyYAML is different: Litestar imports it at the top of `litestar.openapi.plugins` for
its YAML schema renderer, which Skald does not mount (`JsonRenderPlugin` only). A stand-in
module takes its place (`stand_in`): `import yaml` succeeds and costs nothing until
someone reads an attribute of it, which imports the real module and answers from it
(about 1.3 MiB of memory at rest otherwise: bench/README.md, goal 5). Not
`importlib.util.LazyLoader`: on Python 3.11 the next `import yaml` reads the module's
`__spec__`, which loads it there and then. `pdb` likewise: Litestar imports it as the
default of `debugger_module`, used only with `pdb_on_exception`, which Skald never sets
(pdb with bdb, cmd and code: about 0.4 MiB of memory at rest). A stand-in answers
`breakpoint()` and `from pdb import Pdb` with the real module.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager

# Not dependencies of Skald: only the libraries' own tools (or a deprecated corner) use them.
EXTRAS = ("click", "rich", "pygments", "greenlet")
# Imported by a library at its top, used by nothing Skald runs unless asked.
ON_FIRST_USE = ("yaml", "pdb")


@contextmanager
def hidden(names: tuple[str, ...]) -> Iterator[None]:
    """Make `import name` fail for these modules inside the block (not yet imported ones
    only: a module already loaded stays as it is)."""
    hide = [name for name in names if name not in sys.modules]
    for name in hide:
        sys.modules[name] = None  # type: ignore[assignment]  # the import system's "absent"
    try:
        yield
    finally:
        for name in hide:
            if sys.modules.get(name, "") is None:
                del sys.modules[name]


def stand_in(names: tuple[str, ...]) -> None:
    """Put a stand-in in `sys.modules` for each installed module not imported yet; the
    first attribute read of it imports the real one (which then replaces it there)."""
    for name in names:
        if name in sys.modules or importlib.util.find_spec(name) is None:
            continue
        module = types.ModuleType(name, f"{name}: imported at first use (skald.lean)")

        def real_attribute(
            attr: str, name: str = name, module: types.ModuleType = module
        ) -> object:
            if sys.modules.get(name) is module:
                del sys.modules[name]
            return getattr(importlib.import_module(name), attr)

        module.__getattr__ = real_attribute  # type: ignore[method-assign]  # PEP 562
        sys.modules[name] = module


stand_in(ON_FIRST_USE)
with hidden(EXTRAS):
    import httpx  # noqa: F401
    import structlog  # noqa: F401
