"""Links a member plants in her home from inside her sandbox, for the tests that take
every file tool and every files route through them: links at another member's home, at
the host's `/etc` and `/`, at a folder beside the homes, a dangling one and a chain."""

from __future__ import annotations

from pathlib import Path


def plant_links(home: Path, other_name: str, other: Path, outside: Path, dangling: str) -> None:
    """The links, in `home`: `to_{other_name}` is `other` (the other member's home, with
    private/diary.txt); `outside` has secret.txt; `dangling` names a file not yet in the
    other member's private folder. `home` has a notes folder."""
    (home / f"to_{other_name}").symlink_to(other)
    (home / "to_etc").symlink_to("/etc")
    (home / "to_root").symlink_to("/")
    (home / "to_outside").symlink_to(outside)
    (home / "dangling").symlink_to(other / "private" / dangling)
    (home / "chain1").symlink_to("chain2")
    (home / "chain2").symlink_to(other)
    (home / "notes" / "mid").symlink_to(other / "private")
    (home / "secret_link.txt").symlink_to(outside / "secret.txt")


def escaping(other_name: str) -> list[str]:
    """Paths through the planted links that all lead out of the member's home."""
    return [
        f"to_{other_name}/private/diary.txt",
        f"to_{other_name}",
        "to_etc/passwd",
        "to_etc",
        "to_root",
        "to_root/etc/passwd",
        "to_outside/secret.txt",
        "dangling",
        "chain1",
        "chain1/private/diary.txt",
        "notes/mid/diary.txt",
        "notes/mid",
        "secret_link.txt",
    ]
