"""The path router and its file operations against a real file system.

The threat: a member (or a prompt-injected model) plants symbolic links in their home
from inside their sandbox, where they have root, and then asks the host-side tools to
follow them to another member's home, to /etc or to /.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import threading
import time
import tracemalloc
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from skald.errors import ConflictError, InvalidInputError, NotFoundError, SkaldError
from skald.files import lookalike
from skald.files.router import (
    CONTAINER_HOME,
    NewFile,
    PathDeniedError,
    PathRouter,
    ReadOnlyError,
    Resolved,
    Virtual,
    delete,
    entry_for,
    is_binary,
    list_dir,
    make_dir,
    open_read,
    rename,
    upload_name,
    walk,
    write_bytes,
    zip_stream,
)

SECRET = "B's diary: do not read"


@dataclass
class World:
    root: Path
    home: Path  # member A
    other: Path  # member B
    docs: Path
    router: PathRouter

    def read(self, raw: str) -> bytes:
        handle, _ = open_read(self.router.physical(raw))
        with handle:
            return handle.read() or b""


@pytest.fixture
def world(tmp_path: Path) -> World:
    homes = tmp_path / "data" / "homes"
    home, other = homes / "a1", homes / "b2"
    docs = tmp_path / "docs"
    for folder in (home / "notes", other / "private", docs / "guide"):
        folder.mkdir(parents=True)
    (home / "notes" / "plan.md").write_text("# Plan\nline two\n")
    (home / "hello.txt").write_text("hello\n")
    (other / "private" / "diary.txt").write_text(SECRET)
    (docs / "README.md").write_text("# Manual\n")
    (docs / "guide" / "start.md").write_text("Start here\n")
    return World(tmp_path, home, other, docs, PathRouter(home, docs))


def plant(world: World) -> dict[str, Path]:
    """The links an attacker plants in A's home; name -> what it points at."""
    links = {
        "to_other": world.other,
        "to_etc": Path("/etc"),
        "to_root": Path("/"),
        "dangling": world.other / "private" / "new.txt",  # outside and not there yet
        "chain1": world.home / "chain2",  # chain1 -> chain2 -> B's home
        "chain2": world.other,
        "to_docs_parent": world.docs.parent,  # the folder above the manual
    }
    for name, target in links.items():
        (world.home / name).symlink_to(target)
    return links


# -- parsing and resolution, table driven -----------------------------------------------

OK_PATHS = [
    ("~", "home", "~"),
    ("~/", "home", "~"),
    (".", "home", "~"),
    ("./", "home", "~"),
    ("hello.txt", "home", "~/hello.txt"),
    ("./hello.txt", "home", "~/hello.txt"),
    ("~/hello.txt", "home", "~/hello.txt"),
    ("~//notes///plan.md", "home", "~/notes/plan.md"),
    ("notes/./plan.md", "home", "~/notes/plan.md"),
    ("notes\\plan.md", "home", "~/notes/plan.md"),
    (CONTAINER_HOME, "home", "~"),
    (f"{CONTAINER_HOME}/notes/plan.md", "home", "~/notes/plan.md"),
    ("uploads/0a1b/photo.png", "home", "~/uploads/0a1b/photo.png"),
    ("~/uploads", "home", "~/uploads"),
    ("docs", "docs", "docs"),
    ("docs/guide/start.md", "docs", "docs/guide/start.md"),
    ("~/docs/README.md", "docs", "docs/README.md"),
    (f"{CONTAINER_HOME}/docs/README.md", "docs", "docs/README.md"),
    ("docsy/x.md", "home", "~/docsy/x.md"),  # whole names only
    ("~backup.txt".join(["./", ""]), "home", "~/~backup.txt"),
    ("new folder/new file.txt", "home", "~/new folder/new file.txt"),
    ("città/perché.md", "home", "~/città/perché.md"),
]


@pytest.mark.parametrize(("raw", "mount", "agent_path"), OK_PATHS)
def test_paths_that_resolve(world: World, raw: str, mount: str, agent_path: str) -> None:
    found = world.router.resolve(raw)
    assert isinstance(found, Resolved)
    assert (found.mount, found.agent_path) == (mount, agent_path)
    root = world.home if mount == "home" else world.docs
    assert found.root == root.resolve()
    assert found.path == Path(os.path.realpath(root)).joinpath(*found.parts)
    assert found.writable == (mount == "home")


VIRTUAL_PATHS = [
    ("user-memory/people/ada.md", "user-memory", "user-memory/people/ada.md"),
    ("user-memory", "user-memory", "user-memory/"),
    ("user-memory/", "user-memory", "user-memory/"),
    ("shared-memory/recipes/", "shared-memory", "shared-memory/recipes/"),
    ("./shared-memory/house.md", "shared-memory", "shared-memory/house.md"),
    ("~/user-memory/x.md", "user-memory", "user-memory/x.md"),
    (f"{CONTAINER_HOME}/shared-memory/x.md", "shared-memory", "shared-memory/x.md"),
]


@pytest.mark.parametrize(("raw", "store", "agent_path"), VIRTUAL_PATHS)
def test_note_paths_are_reported_as_virtual(
    world: World, raw: str, store: str, agent_path: str
) -> None:
    found = world.router.resolve(raw)
    assert isinstance(found, Virtual)
    assert (found.store, found.agent_path, found.virtual, found.writable) == (
        store,
        agent_path,
        True,
        False,
    )
    assert world.router.is_virtual(raw)
    with pytest.raises(InvalidInputError, match="note store"):
        world.router.physical(raw)


BAD_PATHS: list[tuple[object, type[SkaldError], str]] = [
    ("/etc/passwd", PathDeniedError, "absolute"),
    ("/", PathDeniedError, "absolute"),
    ("/home/skaldx/a", PathDeniedError, "absolute"),
    ("/home/other/x", PathDeniedError, "absolute"),
    ("~b2/private/diary.txt", PathDeniedError, "other homes"),
    ("~root", PathDeniedError, "other homes"),
    ("../b2/private/diary.txt", InvalidInputError, r"'\.\.'"),
    ("~/../b2", InvalidInputError, r"'\.\.'"),
    ("notes/../../b2", InvalidInputError, r"'\.\.'"),
    ("docs/../../data", InvalidInputError, r"'\.\.'"),
    (f"{CONTAINER_HOME}/../../etc/passwd", InvalidInputError, r"'\.\.'"),
    ("..\\b2", InvalidInputError, r"'\.\.'"),
    ("hello.txt\x00.png", InvalidInputError, "control"),
    ("a\nb", InvalidInputError, "control"),
    ("", InvalidInputError, "empty"),
    ("x" * 5000, InvalidInputError, "longer than"),
    ("a/" + "n" * 256, InvalidInputError, "255 bytes"),
    ("/".join(["d"] * 70), InvalidInputError, "levels deep"),
    ("bad\udcffname", InvalidInputError, "Unicode"),
    (42, InvalidInputError, "text"),
    (None, InvalidInputError, "text"),
]


@pytest.mark.parametrize(("raw", "error", "message"), BAD_PATHS)
def test_paths_that_are_refused(
    world: World, raw: object, error: type[SkaldError], message: str
) -> None:
    with pytest.raises(error, match=message):
        world.router.resolve(raw)


def test_a_member_cannot_name_another_members_home_in_any_spelling(world: World) -> None:
    b = world.other
    spellings = [
        str(b),
        str(b / "private" / "diary.txt"),
        "../b2/private/diary.txt",
        "~/../b2/private/diary.txt",
        "~b2/private/diary.txt",
        f"{CONTAINER_HOME}/../b2/private/diary.txt",
        "./../b2",
        "~/./../b2",
        "..%2fb2",  # percent signs are just characters in a name: stays in A's home
    ]
    for raw in spellings:
        try:
            found = world.router.resolve(raw)
        except SkaldError:
            continue
        assert isinstance(found, Resolved)
        assert found.path.is_relative_to(world.home.resolve()), raw


# -- planted links -------------------------------------------------------------------------

ESCAPES = [
    "to_other",
    "to_other/private/diary.txt",
    "to_etc/passwd",
    "to_etc",
    "to_root",
    "to_root/etc/hostname",
    "dangling",
    "chain1",
    "chain1/private/diary.txt",
    "to_docs_parent/docs/README.md",
    "~/to_other/private",
    f"{CONTAINER_HOME}/to_etc/passwd",
]


@pytest.mark.parametrize("raw", ESCAPES)
def test_links_out_of_the_home_are_refused(world: World, raw: str) -> None:
    plant(world)
    with pytest.raises(PathDeniedError, match="outside your home"):
        world.router.resolve(raw)


def test_a_link_in_the_middle_of_a_path_is_checked_too(world: World) -> None:
    (world.home / "notes" / "deep").symlink_to(world.other / "private")
    with pytest.raises(PathDeniedError):
        world.router.resolve("notes/deep/diary.txt")
    # Links that stay inside the home are followed, and the canonical path is reported.
    (world.home / "shortcut").symlink_to("notes")
    found = world.router.physical("shortcut/plan.md")
    assert found.agent_path == "~/notes/plan.md"
    assert world.read("shortcut/plan.md").startswith(b"# Plan")


def test_a_link_loop_fails_closed(world: World) -> None:
    (world.home / "loop1").symlink_to("loop2")
    (world.home / "loop2").symlink_to("loop1")
    try:
        found = world.router.physical("loop1")
    except PathDeniedError:
        return
    with pytest.raises(PathDeniedError):
        open_read(found)


def test_a_home_that_is_itself_a_link_is_refused(world: World) -> None:
    fake = world.root / "data" / "homes" / "c3"
    fake.symlink_to(world.other)
    router = PathRouter(fake, world.docs)
    with pytest.raises(PathDeniedError, match="home folder is a symbolic link"):
        router.resolve("private/diary.txt")
    with pytest.raises(PathDeniedError):
        router.ensure_home()


def test_without_following_the_last_link_the_link_itself_is_named(world: World) -> None:
    plant(world)
    found = world.router.physical("to_other", follow_final=False)
    assert found.path == world.home.resolve() / "to_other"
    assert found.parts == ("to_other",)
    # ... but its parent must still be inside.
    with pytest.raises(PathDeniedError):
        world.router.physical("to_other/private", follow_final=False)
    with pytest.raises(PathDeniedError):
        world.router.physical("chain1/private/diary.txt", follow_final=False)


# -- operations -------------------------------------------------------------------------------


def test_read_list_and_entries(world: World) -> None:
    assert world.read("notes/plan.md") == b"# Plan\nline two\n"
    entries, truncated = list_dir(world.router.physical("~"))
    assert not truncated
    assert [(e.name, e.type) for e in entries] == [("notes", "dir"), ("hello.txt", "file")]
    assert entries[1].path == "~/hello.txt" and entries[1].size == 6
    assert entries[1].mime == "text/plain"
    assert entry_for(world.router.physical("docs/README.md")).mime == "text/markdown"
    with pytest.raises(NotFoundError):
        open_read(world.router.physical("missing.txt"))
    with pytest.raises(InvalidInputError, match="folder"):
        open_read(world.router.physical("notes"))


def test_home_listing_hides_names_that_route_elsewhere(world: World) -> None:
    for name in ("docs", "user-memory", "shared-memory", "shared", "projects", "skills"):
        (world.home / name).mkdir()
        (world.home / name / "x.txt").write_text("shadowed")
    names = [e.name for e in list_dir(world.router.physical("~"))[0]]
    assert "docs" not in names and "user-memory" not in names
    assert not {"shared", "projects", "skills"} & set(names)
    walked = [i.agent_path for i in walk(world.router.physical("~"))]
    assert not any("shadowed" in p or "/docs/" in p or "memory" in p for p in walked)


def test_writes_create_folders_replace_atomically_and_keep_modes(world: World) -> None:
    found = world.router.writable("plans/new/todo.txt")
    entry, created = write_bytes(found, b"one\n")
    assert created and entry.path == "~/plans/new/todo.txt"
    assert (world.home / "plans" / "new" / "todo.txt").read_bytes() == b"one\n"
    (world.home / "plans" / "new" / "todo.txt").chmod(0o600)
    _, created = write_bytes(found, b"two\n")
    assert not created
    target = world.home / "plans" / "new" / "todo.txt"
    assert target.read_bytes() == b"two\n"
    assert target.stat().st_mode & 0o777 == 0o600
    assert not [p for p in target.parent.iterdir() if p.name.startswith(".skald-")]
    with pytest.raises(InvalidInputError, match="folder"):
        write_bytes(world.router.writable("notes"), b"x")
    made = make_dir(world.router.writable("a/b/c"))
    assert made.type == "dir" and (world.home / "a" / "b" / "c").is_dir()


def test_the_manual_is_read_only(world: World) -> None:
    docs = world.router.physical("docs/README.md")
    with pytest.raises(ReadOnlyError):
        write_bytes(docs, b"defaced")
    with pytest.raises(ReadOnlyError):
        make_dir(world.router.physical("docs/new"))
    with pytest.raises(ReadOnlyError):
        delete(world.router.physical("docs/README.md", follow_final=False))
    with pytest.raises(ReadOnlyError):
        rename(
            world.router.physical("docs/README.md", follow_final=False),
            world.router.physical("~/stolen.md", follow_final=False),
        )
    with pytest.raises(ReadOnlyError):
        world.router.writable("~/docs/README.md")
    with pytest.raises(ReadOnlyError):
        NewFile(world.router.physical("docs"), "x.txt")
    assert (world.docs / "README.md").read_text() == "# Manual\n"


def test_delete_removes_the_link_never_its_target(world: World) -> None:
    plant(world)
    delete(world.router.physical("to_other", follow_final=False))
    assert not (world.home / "to_other").is_symlink()
    assert (world.other / "private" / "diary.txt").read_text() == SECRET
    # A folder holding a link to B's home: the recursive delete removes the link only.
    (world.home / "box").mkdir()
    (world.home / "box" / "inner").symlink_to(world.other)
    (world.home / "box" / "etc").symlink_to("/etc")
    with pytest.raises(ConflictError, match="not empty"):
        delete(world.router.physical("box", follow_final=False))
    delete(world.router.physical("box", follow_final=False), recursive=True)
    assert not (world.home / "box").exists()
    assert (world.other / "private" / "diary.txt").read_text() == SECRET
    assert Path("/etc/hostname").exists() or Path("/etc/passwd").exists()
    with pytest.raises(PathDeniedError):
        delete(world.router.physical("chain1/private/diary.txt", follow_final=False))
    with pytest.raises(InvalidInputError, match="place itself"):
        delete(world.router.physical("~", follow_final=False), recursive=True)
    assert (world.other / "private" / "diary.txt").read_text() == SECRET


def test_rename_moves_the_link_itself_and_never_over_another_file(world: World) -> None:
    plant(world)
    moved = rename(
        world.router.physical("to_other", follow_final=False),
        world.router.physical("links/moved", follow_final=False),
    )
    assert moved.type == "symlink" and moved.path == "~/links/moved"
    assert (world.home / "links" / "moved").is_symlink()
    assert sorted(p.name for p in world.other.iterdir()) == ["private"]
    with pytest.raises(ConflictError, match="already exists"):
        rename(
            world.router.physical("hello.txt", follow_final=False),
            world.router.physical("notes/plan.md", follow_final=False),
        )
    with pytest.raises(InvalidInputError, match="into itself"):
        rename(
            world.router.physical("notes", follow_final=False),
            world.router.physical("notes/inner", follow_final=False),
        )
    with pytest.raises(PathDeniedError):
        world.router.physical("to_etc/hosts.bak", follow_final=False)
    assert (world.home / "notes" / "plan.md").read_text().startswith("# Plan")


def test_a_folder_swapped_for_a_link_after_resolution_is_not_followed(world: World) -> None:
    """TOCTOU: resolve, then the sandbox replaces a folder on the path by a link."""
    (world.home / "work").mkdir()
    (world.home / "work" / "a.txt").write_text("mine")
    for_write = world.router.writable("work/b.txt")
    for_read = world.router.physical("work/a.txt")
    for_list = world.router.physical("work")
    for_mkdir = world.router.writable("work/sub/deeper")
    shutil.rmtree(world.home / "work")
    (world.home / "work").symlink_to(world.other / "private")
    with pytest.raises(PathDeniedError):
        write_bytes(for_write, b"planted")
    with pytest.raises(PathDeniedError):
        open_read(for_read)
    with pytest.raises(PathDeniedError):
        list_dir(for_list)
    with pytest.raises(PathDeniedError):
        make_dir(for_mkdir)
    with pytest.raises(PathDeniedError):
        NewFile(for_list, "up.txt")
    assert sorted(p.name for p in (world.other / "private").iterdir()) == ["diary.txt"]


def test_a_file_swapped_for_a_link_after_resolution_is_not_followed(world: World) -> None:
    found = world.router.physical("hello.txt")
    (world.home / "hello.txt").unlink()
    (world.home / "hello.txt").symlink_to(world.other / "private" / "diary.txt")
    with pytest.raises(PathDeniedError):
        open_read(found)
    with pytest.raises(PathDeniedError):
        write_bytes(found, b"overwritten")
    assert (world.other / "private" / "diary.txt").read_text() == SECRET


def test_pipes_and_other_special_files_are_never_opened(world: World) -> None:
    os.mkfifo(world.home / "pipe")
    found = world.router.physical("pipe")
    done = threading.Event()

    def attempt() -> None:
        with pytest.raises(PathDeniedError, match="not a regular file"):
            open_read(found)
        done.set()

    thread = threading.Thread(target=attempt, daemon=True)
    thread.start()
    thread.join(5)
    assert done.is_set(), "opening a FIFO blocked"
    with pytest.raises(PathDeniedError):
        write_bytes(world.router.writable("pipe"), b"x")
    assert [i.name for i in walk(world.router.physical("~")) if i.name == "pipe"] == []


def test_new_files_never_overwrite(world: World) -> None:
    folder = world.router.writable("inbox")
    make_dir(folder)
    names = []
    for data in (b"1", b"2", b"3"):
        upload = NewFile(folder, "scan.pdf")
        upload.write(data)
        names.append(upload.commit().name)
    assert names == ["scan.pdf", "scan (2).pdf", "scan (3).pdf"]
    assert (world.home / "inbox" / "scan (3).pdf").read_bytes() == b"3"
    aborted = NewFile(folder, "half.bin")
    aborted.write(b"partial")
    aborted.abort()
    assert sorted(p.name for p in (world.home / "inbox").iterdir()) == sorted(names)
    with pytest.raises(InvalidInputError, match="reserved"):
        NewFile(world.router.writable("~"), "docs")


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("photo.jpg", "photo.jpg"),
        ("C:\\Users\\ada\\photo.jpg", "photo.jpg"),
        ("../../etc/passwd", "passwd"),
        ("..", "file"),
        ("", "file"),
        ("  spaced.txt  ", "spaced.txt"),
        ("perché.md", "perché.md"),
    ],
)
def test_upload_names(raw: str, clean: str) -> None:
    assert upload_name(raw) == clean


SPOOFING = [
    "photo\u202egnp.exe",  # right-to-left override: shows as "photoexe.png"
    "a\u2066b\u2069.txt",  # isolates
    "zero\u200bwidth.txt",
    "bom\ufeff.txt",
    "new\nline.txt",
    "nul\x00.txt",
]


@pytest.mark.parametrize("name", SPOOFING)
def test_names_with_control_or_format_characters_are_refused_for_uploads_and_paths(
    world: World, name: str
) -> None:
    with pytest.raises(InvalidInputError, match="characters") as refused:
        upload_name(name)
    assert "\u202e" not in str(refused.value)  # the message does not spoof either
    for raw in (name, f"~/notes/{name}", f"user-memory/{name}"):
        with pytest.raises(InvalidInputError, match="characters"):
            world.router.parse(raw)
    with pytest.raises(InvalidInputError):
        NewFile(world.router.writable("~"), name)


LOOK_ALIKES = [
    ("report\u2028.pdf", "U+2028"),  # line separator (Zl)
    ("report\u2029.pdf", "U+2029"),  # paragraph separator (Zp)
    ("a\u034fb.txt", "U+034F"),  # combining grapheme joiner (default-ignorable)
    ("\u3164.txt", "U+3164"),  # Hangul filler
    ("\u115fx.txt", "U+115F"),  # Hangul choseong filler
    ("\u1160x.txt", "U+1160"),  # Hangul jungseong filler
    ("\uffa0x.txt", "U+FFA0"),  # halfwidth Hangul filler
    ("\u2800.txt", "U+2800"),  # braille blank
    ("a\ufe0fb.txt", "U+FE0F"),  # variation selector
    ("a\U000e0100b.txt", "U+E0100"),  # variation selector supplement
    ("report\u2024pdf", "U+2024"),  # one dot leader: reads as report.pdf
    ("bills\u2215march.pdf", "U+2215"),  # division slash: reads as bills/march.pdf
    ("p\u0430ypal.pdf", "U+0430"),  # Cyrillic а in a Latin word
    ("\u03c1\u0430ypal.pdf", "U+"),  # Greek, Cyrillic and Latin in one word
    ("\u0456nvoice.pdf", "U+0456"),  # Cyrillic і
]
READ_AS_WRITTEN = [
    "\u041e\u0442\u0447\u0451\u0442 report.pdf",  # a Cyrillic word and a Latin word
    "\u65e5\u672c\u8a9e\u306e\u30d5\u30a1\u30a4\u30eb.txt",  # Han, Hiragana, Katakana
    "\ud55c\uad6d\uc5b4 \ud30c\uc77c.hwp",
    "\u0627\u0644\u0639\u0631\u0628\u064a\u0629 \u0662\u0660\u0662\u0664.pdf",
    "\u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac.txt",
    "\u00dcbung\u2013L\u00f6sung (final).pdf",
    "caf\u00e9 \u00b7 50%.txt",
    "x\u3002y.txt",  # the ideographic full stop is not in the confusables data as "."
    "\uff52\uff45\uff50\uff4f\uff52\uff54.pdf",  # fullwidth Latin: one script
]


@pytest.mark.parametrize(("name", "code"), LOOK_ALIKES)
def test_names_with_invisible_or_look_alike_characters_are_refused_naming_the_character(
    world: World, name: str, code: str
) -> None:
    with pytest.raises(InvalidInputError, match=code.replace("+", "\\+")):
        upload_name(name)
    for raw in (name, f"~/notes/{name}", f"user-memory/{name}"):
        with pytest.raises(InvalidInputError, match="invalid name"):
            world.router.parse(raw)
    (world.home / "notes" / name).write_text("x")  # made in the sandbox: not listed
    entries, _ = list_dir(world.router.physical("~/notes"))
    assert name not in [e.name for e in entries]


@pytest.mark.parametrize("name", READ_AS_WRITTEN)
def test_names_in_one_script_per_word_and_ordinary_punctuation_are_accepted(
    world: World, name: str
) -> None:
    assert upload_name(name) == name
    parsed = world.router.parse(f"~/notes/{name}")
    assert not isinstance(parsed, Virtual) and parsed[1] == ["notes", name]


def test_latin_letters_the_fast_path_passes_are_passed_by_the_confusables_tables_too() -> None:
    # The fast path skips the tables for ASCII plus the letters U+00C0-U+017F; each of
    # those letters, alone, doubled, beside ASCII letters, digits and punctuation, must
    # be a name the tables accept as well, or the fast path would let a look-alike in.
    plain = [chr(c) for c in range(0xC0, 0x180) if c not in (0xD7, 0xF7)]
    for ch in plain:
        for name in (ch, f"{ch}{ch}", f"a{ch}b 1.pdf", f"Report-{ch}_(2).txt", f"{ch}z/x"):
            assert lookalike._PLAIN_LATIN.fullmatch(name)
            assert lookalike._reason_from_tables(name) is None, (hex(ord(ch)), name)
    for outside in ("\u00d7", "\u00f7", "\u00b5", "\u00b7", "\u00ad", "\u0180", "\u0430"):
        assert not lookalike._PLAIN_LATIN.fullmatch(f"a{outside}b")


def test_the_confusables_tables_are_not_loaded_at_start_nor_for_accented_latin_names() -> None:
    code = (
        "import sys, skald.server, skald.cli\n"
        "from skald.files.lookalike import look_alike_reason\n"
        "assert 'confusable_homoglyphs' not in sys.modules, 'loaded at import'\n"
        "assert look_alike_reason('Perch\u00e9 \u0141\u00f3d\u017a.pdf') is None\n"
        "assert 'confusable_homoglyphs' not in sys.modules, 'loaded for Latin'\n"
        "assert look_alike_reason('p\u0430ypal.pdf') is not None\n"
        "assert 'confusable_homoglyphs' in sys.modules\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr


def test_names_are_normalised_to_nfc(world: World) -> None:
    decomposed = "cafe\u0301.txt"
    assert upload_name(decomposed) == "caf\u00e9.txt"
    parsed = world.router.parse(f"~/notes/{decomposed}")
    assert not isinstance(parsed, Virtual) and parsed[1] == ["notes", "caf\u00e9.txt"]
    assert world.router.physical(f"notes/{decomposed}").agent_path == "~/notes/caf\u00e9.txt"


def test_a_spoofing_name_planted_in_the_home_is_not_listed(world: World) -> None:
    (world.home / "notes" / "photo\u202egnp.exe").write_text("x")
    entries, _ = list_dir(world.router.physical("~/notes"))
    assert all("\u202e" not in e.name for e in entries)


def test_upload_names_are_cut_to_255_bytes_keeping_the_suffix() -> None:
    name = upload_name("è" * 300 + ".pdf")
    assert len(name.encode()) <= 255 and name.endswith(".pdf")


def test_walk_never_leaves_the_folder(world: World) -> None:
    plant(world)
    (world.home / "notes" / "deep").symlink_to(world.other)
    items = list(walk(world.router.physical("~")))
    paths = [i.agent_path for i in items]
    assert "~/notes/plan.md" in paths and "~/hello.txt" in paths
    assert not any("diary" in p or "to_" in p or "chain" in p or "deep" in p for p in paths)
    hidden = world.home / ".cache"
    hidden.mkdir()
    (hidden / "x").write_text("x")
    assert "~/.cache/x" in [i.agent_path for i in walk(world.router.physical("~"))]
    assert "~/.cache/x" not in [
        i.agent_path for i in walk(world.router.physical("~"), hidden=False)
    ]


def test_binary_detection() -> None:
    assert is_binary(b"\x89PNG\r\n\x1a\n\x00\x00")
    assert is_binary(b"\xff\xfe\xfa plain")
    assert not is_binary("città".encode())
    assert not is_binary("città".encode()[:-1])  # a character cut at the end


# -- ZIP ------------------------------------------------------------------------------------


def test_a_folder_as_zip(world: World) -> None:
    plant(world)
    (world.home / "notes" / "sub").mkdir()
    (world.home / "notes" / "sub" / "photo.jpg").write_bytes(os.urandom(3000))
    (world.home / "notes" / "empty").mkdir()
    (world.home / "notes" / "out").symlink_to(world.other)
    data = b"".join(zip_stream(world.router.physical("notes")))
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert archive.testzip() is None
        names = sorted(archive.namelist())
        assert names == [
            "notes/empty/",
            "notes/plan.md",
            "notes/sub/",
            "notes/sub/photo.jpg",
        ]
        assert archive.read("notes/plan.md") == b"# Plan\nline two\n"
        photo = archive.getinfo("notes/sub/photo.jpg")
        assert photo.compress_type == zipfile.ZIP_STORED
        assert archive.read(photo) == (world.home / "notes" / "sub" / "photo.jpg").read_bytes()
        assert archive.getinfo("notes/plan.md").compress_type == zipfile.ZIP_DEFLATED
    whole = b"".join(zip_stream(world.router.physical("~")))
    with zipfile.ZipFile(io.BytesIO(whole)) as archive:
        assert all(n.startswith("home/") for n in archive.namelist())
        assert not any("diary" in n or "to_" in n for n in archive.namelist())
        assert SECRET.encode() not in whole


def test_zip_streams_in_chunks_with_flat_memory(world: World) -> None:
    big = world.home / "big"
    big.mkdir()
    block = os.urandom(1024 * 1024)
    for n in range(24):  # 24 MiB, stored (already-compressed suffix)
        (big / f"clip{n:02}.mp4").write_bytes(block)
    tracemalloc.start()
    try:
        chunks = 0
        total = 0
        largest = 0
        for chunk in zip_stream(world.router.physical("big")):
            chunks += 1
            total += len(chunk)
            largest = max(largest, len(chunk))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert total > 24 * 1024 * 1024
    assert chunks > 100
    assert largest < 512 * 1024
    assert peak < 4 * 1024 * 1024, f"peak {peak} bytes while zipping 24 MiB"


def test_a_stopped_zip_ends_early(world: World) -> None:
    (world.home / "many").mkdir()
    for n in range(50):
        (world.home / "many" / f"{n}.txt").write_text("x" * 70_000)
    stop = threading.Event()
    stream = zip_stream(world.router.physical("many"), stop=stop)
    next(stream)
    stop.set()
    started = time.monotonic()
    rest = list(stream)
    assert time.monotonic() - started < 1
    assert len(rest) <= 2


def test_containment_needs_the_separator_a_sibling_with_a_longer_name_is_outside(
    world: World,
) -> None:
    from skald.files.router import _inside

    assert _inside("/home/ab", "/home/ab") and _inside("/home/ab/c", "/home/ab")
    assert _inside("/home/ab/c", "/home/ab/")
    assert not _inside("/home/abc", "/home/ab")
    assert not _inside("/home/abc/x", "/home/ab")
    # A link in the home to a sibling folder whose name starts with the home's name.
    sibling = world.home.parent / f"{world.home.name}x"
    sibling.mkdir()
    (sibling / "secret.txt").write_text(SECRET)
    (world.home / "near").symlink_to(sibling)
    for raw in ("near", "near/secret.txt"):
        with pytest.raises(PathDeniedError):
            world.router.physical(raw)
