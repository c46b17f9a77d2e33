"""Memory signposts (#26 item 5). The note stores are not folders, but a model working
in the sandbox looks for them there (`ls ~/user-memory`) and would write notes as plain
files nobody reads. So the sandbox gets a read-only folder at each store's place holding
a README that opens "This is not a folder" and names the tools; it is written again at
every ensure (`MemberMount.files`). The router never routes to it (`sandbox_only`):
`user-memory/…` stays the note store for the file tools.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from skald.plugins import hookimpl

if TYPE_CHECKING:
    from skald.files.mounts import MemberMount
    from skald.paths import DataLayout

_README = """This is not a folder: it stands where {what} would be, to tell you where they are.

{What} live in Skald's note store, not in files. Inside this sandbox they cannot be read
or written; anything saved here as a plain file would never be seen as a note (and this
folder is read-only anyway).

Use the assistant's note tools with paths that start with `{store}/`:
- read_file / list_files / memory_search to read and find notes,
- write_file / edit_file to write them (`{store}/people/ada.md`).
{approval}
"""


def readme(store: str) -> str:
    shared = store == "shared-memory"
    what = "the household's shared notes" if shared else "your own notes"
    approval = "Writing a household note asks a member for approval first.\n" if shared else ""
    return _README.format(
        what=what, What=what[0].upper() + what[1:], store=store, approval=approval
    )


@hookimpl
def skald_mounts(layout: DataLayout) -> list[MemberMount]:
    from skald.files.mounts import CONTAINER_HOME, MemberMount
    from skald.store.note_paths import SHARED_MEMORY, USER_MEMORY

    return [
        MemberMount(
            name=f"{store}-signpost",
            prefix=f"{store}-signpost",
            label="Signpost",
            host_path=layout.root / "signposts" / store,
            container_path=f"{CONTAINER_HOME}/{store}",
            read_only=True,
            sandbox_only=True,
            files=(("README.md", readme(store)),),
        )
        for store in (USER_MEMORY, SHARED_MEMORY)
    ]
