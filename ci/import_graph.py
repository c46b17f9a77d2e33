"""Print which top-level package of `skald` imports which, as a Mermaid graph.

docs/dev/architecture.md carries this output between its `import-graph` markers, and
tests/test_layers.py fails when the two disagree, so the picture is always the code's.
Usage: python ci/import_graph.py [--check docs/dev/architecture.md]
"""

from __future__ import annotations

import sys
from pathlib import Path

import grimp

BEGIN = "<!-- import-graph:begin (ci/import_graph.py) -->"
END = "<!-- import-graph:end -->"


def edges(package: str = "skald") -> list[tuple[str, str]]:
    """(importer, imported) pairs between the top-level parts of `package`."""
    graph = grimp.build_graph(package, cache_dir=None, exclude_type_checking_imports=True)
    found: set[tuple[str, str]] = set()
    for module in graph.modules:
        parts = module.split(".")
        if len(parts) < 2:
            continue
        for imported in graph.find_modules_directly_imported_by(module):
            other = imported.split(".")
            if len(other) >= 2 and other[1] != parts[1]:
                found.add((parts[1], other[1]))
    return sorted(found)


# The ground floor (errors, log, paths, config, assets) is imported by nearly everything;
# drawing those arrows would hide the structure, so the picture leaves them out.
GROUND = frozenset({"errors", "log", "paths", "config", "assets", "permissions", "walk"})


def mermaid(pairs: list[tuple[str, str]]) -> str:
    lines = ["```mermaid", "graph TD"]
    lines += [f"    {a} --> {b}" for a, b in pairs if b not in GROUND and a != "__main__"]
    lines.append("```")
    return "\n".join(lines)


def block() -> str:
    return f"{BEGIN}\n{mermaid(edges())}\n{END}"


def current_block(doc: Path) -> str:
    text = doc.read_text(encoding="utf-8")
    start, end = text.index(BEGIN), text.index(END) + len(END)
    return text[start:end]


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "--check":
        if current_block(Path(argv[1])) != block():
            print(f"{argv[1]}: the import graph is stale; paste `python ci/import_graph.py`")
            return 1
        return 0
    print(block())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
