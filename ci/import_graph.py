"""Print which top-level package of `skald` imports which, as a Mermaid graph.

Each feature package (`skald/features/<name>/`) is a node of its own, drawn inside a
`features` box, so the picture shows which feature leans on which library below it.
docs/dev/architecture.md carries this output between its `import-graph` markers, and
tests/test_layers.py fails when the two disagree, so the picture is always the code's.
Usage: python ci/import_graph.py [--check | --write] [docs/dev/architecture.md]
"""

from __future__ import annotations

import sys
from pathlib import Path

import grimp

BEGIN = "<!-- import-graph:begin (ci/import_graph.py) -->"
END = "<!-- import-graph:end -->"


FEATURES = "features"


def node(module: str) -> str | None:
    """The picture's node of a module: its top-level part, or `features_<name>`."""
    parts = module.split(".")
    if len(parts) < 2:
        return None
    if parts[1] == FEATURES and len(parts) >= 3:
        return f"{FEATURES}_{parts[2]}"
    return parts[1]


def edges(package: str = "skald") -> list[tuple[str, str]]:
    """(importer, imported) pairs between the nodes of `package`."""
    graph = grimp.build_graph(package, cache_dir=None, exclude_type_checking_imports=True)
    found: set[tuple[str, str]] = set()
    for module in graph.modules:
        here = node(module)
        for imported in graph.find_modules_directly_imported_by(module):
            there = node(imported)
            if here and there and here != there:
                found.add((here, there))
    return sorted(found)


# The ground floor (errors, log, paths, config, assets) is imported by nearly everything;
# drawing those arrows would hide the structure, so the picture leaves them out.
GROUND = frozenset({"errors", "log", "paths", "config", "assets", "permissions", "walk"})


def mermaid(pairs: list[tuple[str, str]]) -> str:
    lines = ["```mermaid", "graph TD"]
    shown = [(a, b) for a, b in pairs if b not in GROUND and a != "__main__"]
    features = sorted({n for pair in shown for n in pair if n.startswith(FEATURES + "_")})
    if features:
        lines.append(f"    subgraph {FEATURES}")
        lines += [f"        {n}[{n.removeprefix(FEATURES + '_')}]" for n in features]
        lines.append("    end")
    lines += [f"    {a} --> {b}" for a, b in shown]
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
            print(
                f"{argv[1]}: the import graph is stale; run `python ci/import_graph.py --write {argv[1]}`"
            )
            return 1
        return 0
    if len(argv) == 2 and argv[0] == "--write":
        doc = Path(argv[1])
        text = doc.read_text(encoding="utf-8")
        doc.write_text(text.replace(current_block(doc), block()), encoding="utf-8")
        return 0
    print(block())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
