"""The command line names what was wrong, and every `skald …` command line the product
shows a person (messages, the manual, the installer) uses flags that exist."""

from __future__ import annotations

import argparse
import ast
import io
import re
import shlex
from pathlib import Path

import pytest

from skald.cli import build_parser, main

ROOT = Path(__file__).resolve().parent.parent


def _run(argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv, environ={"HOME": str(tmp_path)}, stdin=io.StringIO(""), stdout=io.StringIO())
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--bogus"], "unknown option '--bogus' (see `skald --help`)"),
        (["doctor", "--bogus"], "unknown option '--bogus' for `skald doctor`"),
        (["doctor", "--jsn"], "(see `skald doctor --help`)"),
        (["user", "add", "bob", "--role", "member", "--frob"], "'--frob' for `skald user add`"),
        (["backup", "extra"], "unexpected argument 'extra' for `skald backup`"),
        (["--data", "/nowhere", "--frob", "status"], "unknown option '--frob'"),
    ],
)
def test_an_unknown_option_is_named_with_the_command_it_was_given_to(
    argv: list[str], said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _run(argv, tmp_path, capsys)
    assert code == 2
    assert said in err, err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / ".local").exists()  # nothing was created


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return {
        name: sub
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
        for name, sub in action.choices.items()
    }


def _flags_of(words: list[str]) -> tuple[str, set[str]] | None:
    """(`skald cmd sub`, its option strings) for a command line, None if not a command."""
    parser: argparse.ArgumentParser = build_parser()
    prog = "skald"
    for word in words:
        sub = _commands(parser).get(word)
        if sub is None:
            if word.startswith("-"):
                continue  # an option before the command (`--data DIR`)
            break
        parser, prog = sub, f"{prog} {word}"
    if prog == "skald" or prog.startswith("skald update"):
        return None  # not a command line, or update.sh's own options (passed through)
    return prog, set(parser._option_string_actions)


def _snippets() -> list[tuple[str, str]]:
    """(where, text after `skald `) for every `skald …` the product shows a person."""
    texts: list[tuple[str, str]] = []
    for path in (ROOT / "skald").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                texts.append((str(path.relative_to(ROOT)), node.value))
    docs = [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), ROOT / "install.sh"]
    docs += [p for p in (ROOT / "installer").rglob("*") if p.is_file() and p.suffix != ".pyc"]
    for path in docs:
        texts.append((str(path.relative_to(ROOT)), path.read_text(encoding="utf-8")))
    out = []
    for where, text in texts:
        for match in re.finditer(r"(?<![\w/.-])skald ((?:[^`\"'\n|;)]|\\\n)+)", text):
            out.append((where, match.group(1)))
    return out


def test_every_skald_command_line_shown_to_a_person_uses_real_flags() -> None:
    checked = 0
    wrong = []
    for where, snippet in _snippets():
        try:
            words = shlex.split(snippet.replace("\\\n", " "), comments=False)
        except ValueError:
            words = snippet.split()
        found = _flags_of(words)
        if found is None:
            continue
        prog, flags = found
        checked += 1
        for word in words:
            flag = word.split("=", 1)[0].rstrip(".,:")
            if re.fullmatch(r"--[a-z][a-z-]*", flag) and flag not in flags:
                wrong.append(f"{where}: `{prog}` has no {flag} (in: skald {snippet.strip()})")
    assert checked > 20, checked  # the scan sees the manual's examples, or proves nothing
    assert not wrong, "\n".join(wrong)
