"""The `skald` command line: `skald [--data DIR] COMMAND ...`.

Errors are one line on stderr: exit 2 for a usage mistake, 78 for a bad configuration,
1 for any other failure.
Secrets come from stdin (`--*-stdin`, one line each, in the order the help gives) or
from prompts on the terminal (`/dev/tty`, so `curl | bash` can still ask).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import sys
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any, NoReturn, TextIO

import msgspec

import skald.lean  # noqa: F401  (first: httpx and structlog without their CLI extras)
from skald import __version__
from skald.config import Config, PluginsConfig, Sections, load_config, resolve_data_dir
from skald.core.accounts import AccountService
from skald.core.context import Core
from skald.core.users import check_password, check_username
from skald.errors import ConfigError, SkaldError
from skald.log import configure_logging, get_logger
from skald.ops.accounts import AccountAction, account_action
from skald.paths import DataLayout
from skald.store.sessions import SessionStore

log = get_logger("skald.cli")

EXIT_CONFIG = 78  # sysexits.h EX_CONFIG


class UsageError(SkaldError):
    """The command line itself is wrong (exit code 2)."""


class SkaldArgumentParser(argparse.ArgumentParser):
    """argparse whose mistakes are `UsageError`s naming what was wrong and where.

    Trap: argparse reports an unknown option from the top parser (so `skald doctor
    --jsn` pointed at `skald --help`), and an unknown option before the command hid
    behind "a COMMAND is required". `parse_args` names the option and the command it
    was given to; every command records its `prog` for that (`_prog`).
    """

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see `{self.prog} --help`)")

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        argv = list(sys.argv[1:] if args is None else args)
        self._reject_unknown_leading_options(argv)
        parsed, extras = self.parse_known_args(argv, namespace)
        if extras:
            prog = getattr(parsed, "_prog", self.prog)
            first = extras[0]
            what = "unknown option" if first.startswith("-") else "unexpected argument"
            raise UsageError(f"{what} {first!r} for `{prog}` (see `{prog} --help`)")
        return parsed

    def _reject_unknown_leading_options(self, argv: list[str]) -> None:
        """Options before the command must be this parser's own (`--data`, `--help`)."""
        i = 0
        while i < len(argv) and argv[i].startswith("-") and argv[i] != "--":
            flag = argv[i].split("=", 1)[0]
            action = self._option_string_actions.get(flag)
            if action is None and not any(o.startswith(flag) for o in self._option_string_actions):
                raise UsageError(f"unknown option {flag!r} (see `{self.prog} --help`)")
            takes_value = action is not None and action.nargs != 0 and "=" not in argv[i]
            i += 2 if takes_value else 1


# -- reading secrets ----------------------------------------------------------------


class SecretSource:
    """Hands out secrets from stdin lines or terminal prompts, as the flags say."""

    def __init__(self, stdin: TextIO) -> None:
        self._stdin = stdin

    def line(self, what: str) -> str:
        text = self._stdin.readline()
        if not text:
            raise UsageError(f"expected the {what} on stdin, got end of input")
        return text.rstrip("\r\n")

    def rest(self) -> str:
        """Everything left on stdin (a message piped to `skald chat -`)."""
        return self._stdin.read()

    def prompt(self, what: str, *, confirm: bool = False) -> str:
        import getpass

        _require_tty(what)
        first = getpass.getpass(f"{what}: ")
        if confirm and getpass.getpass(f"{what} (again): ") != first:
            raise SkaldError("the two entries differ; nothing was changed")
        return first

    def get(self, from_stdin: bool, what: str, *, confirm: bool = False) -> str:
        return self.line(what) if from_stdin else self.prompt(what, confirm=confirm)


# Without a terminal, the flag that gives the command what it would have asked for.
_FLAG_FOR: tuple[tuple[str, str], ...] = (
    ("recovery code", "--recovery-code-stdin"),
    ("password", "--password-stdin"),
    ("username", "--admin NAME"),
)


def _require_tty(what: str) -> None:
    try:
        fd = os.open("/dev/tty", os.O_RDWR)
    except OSError:
        flag = next((f for word, f in _FLAG_FOR if word in what.lower()), None)
        how = f"pass it with {flag}" if flag else "run the command in a terminal"
        raise UsageError(f"no terminal to ask for the {what}: {how}") from None
    os.close(fd)


def _ask_line(prompt: str, default: str) -> str:
    _require_tty(prompt.lower())
    # Two handles: a terminal is not seekable, so one text-mode "r+" handle fails.
    with (
        Path("/dev/tty").open("w", encoding="utf-8") as out,
        Path("/dev/tty").open(encoding="utf-8") as tty,
    ):
        out.write(f"{prompt} [{default}]: ")
        out.flush()
        answer = tty.readline().strip()
    return answer or default


# -- commands -------------------------------------------------------------------------

Handler = Callable[[argparse.Namespace, "Env"], Coroutine[None, None, int]]


class Env(msgspec.Struct, kw_only=True):
    layout: DataLayout
    config: Config
    secrets: SecretSource
    out: TextIO
    # The environment main() was given (commands never read os.environ themselves).
    environ: dict[str, str] = msgspec.field(default_factory=dict)
    # Set only for commands that tolerate a bad configuration (doctor): `config` is then
    # the built-in defaults and this is the error.
    config_error: str | None = None


async def _with_core(
    env: Env, fn: Callable[[Core], Coroutine[None, None, int]], *, create: bool = False
) -> int:
    core = await Core.open(env.layout, env.config, create=create)
    try:
        return await fn(core)
    finally:
        await core.close()


def _print_recovery_code(out: TextIO, username: str, code: str) -> None:
    out.write(
        f"\nRecovery code for {username} (shown only this once; store it somewhere safe):\n\n"
        f"    {code}\n\n"
        "Without it, a forgotten password means this account's private data is lost.\n"
    )


async def cmd_setup(args: argparse.Namespace, env: Env) -> int:
    interactive = not args.password_stdin
    name = args.admin or (_ask_line("Administrator username", "admin") if interactive else None)
    if not name:
        raise UsageError("--admin NAME is required with --password-stdin")
    name = check_username(name)
    if env.layout.system_db.exists():
        # Refuse before asking for a password that would not be used.
        async def has_admin(core: Core) -> int:
            return int(await core.users.admin_exists())

        if await _with_core(env, has_admin):
            raise SkaldError(
                f"an administrator already exists in {env.layout.root}; nothing changed"
            )
    password = env.secrets.get(args.password_stdin, f"password for {name}", confirm=True)
    check_password(password)

    async def run(core: Core) -> int:
        if await core.users.admin_exists():
            raise SkaldError(
                f"an administrator already exists in {env.layout.root}; nothing changed"
            )
        created = await core.users.create(name, password, "admin")
        log.info("admin created", username=created.user.username, user_id=created.user.id)
        env.out.write(f"Created administrator {created.user.username} in {env.layout.root}.\n")
        if created.recovery_code:
            _print_recovery_code(env.out, created.user.username, created.recovery_code)
        return 0

    return await _with_core(env, run, create=True)


async def cmd_user_add(args: argparse.Namespace, env: Env) -> int:
    name = check_username(args.name)
    password = env.secrets.get(args.password_stdin, f"password for {name}", confirm=True)

    async def run(core: Core) -> int:
        created = await core.users.create(name, password, args.role, args.display_name)
        log.info("user created", username=created.user.username, role=args.role)
        kind = "encrypted" if created.user.encrypted else "not encrypted"
        env.out.write(f"Created {created.user.username} ({args.role}, {kind}).\n")
        if created.recovery_code:
            _print_recovery_code(env.out, created.user.username, created.recovery_code)
        return 0

    return await _with_core(env, run)


async def cmd_user_list(args: argparse.Namespace, env: Env) -> int:
    async def run(core: Core) -> int:
        users = await core.registry.list_users()
        if args.json:
            env.out.write(msgspec.json.encode(users).decode() + "\n")
            return 0
        rows = [("USERNAME", "NAME", "ROLE", "ENCRYPTED", "ACTIVE", "CREATED")]
        rows += [
            (u.username, u.display_name, u.role, _yn(u.encrypted), _yn(u.active), u.created_at)
            for u in users
        ]
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        for r in rows:
            env.out.write(
                "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() + "\n"
            )
        return 0

    return await _with_core(env, run)


async def cmd_privacy(args: argparse.Namespace, env: Env) -> int:
    """A member's privacy self-check as an administrator sees it: counts only (no
    provider or connector names of theirs), each line read from the files now."""
    from skald.features.privacy.check import gather, render, words

    async def run(core: Core) -> int:
        user = await core.registry.find_user(args.name)
        if user is None:
            raise SkaldError(f"no user named {args.name!r}")
        facts = await gather(core.registry.db, env.layout, user.id, detail=False)
        if args.json:
            env.out.write(msgspec.json.encode(facts).decode() + "\n")
            return 0
        # The page's English, from the same keys and values (one wording, not two).
        english = await asyncio.to_thread(words, "en")
        for f in facts:
            says, how = render(f.sentence, english), render(f.how, english)
            env.out.write(f"[{f.status}] {says}\n    how we checked: {how}\n")
        return 0

    return await _with_core(env, run)


def _yn(flag: bool) -> str:
    return "yes" if flag else "no"


async def cmd_user_passwd(args: argparse.Namespace, env: Env) -> int:
    async def run(core: Core) -> int:
        user = await core.users.get(args.name)
        if user.encrypted and not args.with_current:
            raise SkaldError(
                f"{user.username}'s data is encrypted with their password: pass --with-current "
                f"(current password first), or use `skald user recover {user.username}`"
            )
        current = (
            env.secrets.get(args.password_stdin, "current password") if args.with_current else None
        )
        new = env.secrets.get(
            args.password_stdin, f"new password for {user.username}", confirm=True
        )
        if current is None:
            await core.users.set_password(user.username, new)
        else:
            await core.users.change_password(user.username, current, new)
        log.info("password changed", username=user.username)
        env.out.write(f"Password changed for {user.username}.\n")
        return 0

    return await _with_core(env, run)


async def cmd_user_recover(args: argparse.Namespace, env: Env) -> int:
    async def run(core: Core) -> int:
        user = await core.users.get(args.name)
        code = env.secrets.get(args.recovery_code_stdin, "recovery code")
        new = env.secrets.get(
            args.password_stdin, f"new password for {user.username}", confirm=True
        )
        fresh = await core.users.recover(user.username, code, new)
        log.info("password reset with recovery code", username=user.username)
        env.out.write(
            f"Password reset for {user.username}. The old recovery code no longer works.\n"
        )
        _print_recovery_code(env.out, user.username, fresh)
        return 0

    return await _with_core(env, run)


async def _account_action(
    env: Env, action: AccountAction, name: str
) -> tuple[str, bool, list[str]]:
    """Run an account change through the account service: the running server's (over the
    ops channel, so it closes the member's sessions, pages and sandbox as the web UI
    does) or, with no server, one of our own. Returns the username and whether a server
    did it, and (after a deletion) what of the home could not be removed. A server that holds the directory but cannot be asked is an error, never a
    reason to write behind its back."""
    from skald.ops.channel import OPS_PREFIX, ops_request

    answer = await ops_request(
        env.layout, env.config, "POST", f"{OPS_PREFIX}/users/{action}", {"username": name}
    )
    if answer is not None:
        return str(answer["username"]), True, [str(item) for item in answer.get("left", [])]
    done: list[str] = []
    left: list[str] = []

    async def run(core: Core) -> int:
        accounts = AccountService(core.users, core.registry, SessionStore(core.registry.db))
        user, _, not_removed = await account_action(accounts, name, action)
        left.extend(not_removed)
        done.append(user.username)
        return 0

    await _with_core(env, run)
    return done[0], False, left


def _by_server(by_server: bool) -> str:
    return " (by the running server)" if by_server else ""


async def cmd_user_deactivate(args: argparse.Namespace, env: Env) -> int:
    name, by_server, _ = await _account_action(env, "deactivate", args.name)
    env.out.write(
        f"Deactivated {name}; their data is kept. Their sessions are closed{_by_server(by_server)}.\n"
    )
    return 0


async def cmd_user_activate(args: argparse.Namespace, env: Env) -> int:
    name, by_server, _ = await _account_action(env, "activate", args.name)
    env.out.write(f"Activated {name}{_by_server(by_server)}.\n")
    return 0


async def cmd_user_delete(args: argparse.Namespace, env: Env) -> int:
    if not args.yes:
        raise UsageError("deleting an account destroys its private data: add --yes to confirm")
    name, by_server, left = await _account_action(env, "delete", args.name)
    if left:
        user_id = left[0].split("/", 1)[0]
        home = shlex.quote(str(env.layout.home(user_id)))
        env.out.write(
            f"Deleted {name}{_by_server(by_server)}, but {len(left)} item(s) of their home "
            f"could not be removed (made by root in the sandbox?), e.g. {left[0]}.\n"
            f"Remove them as root: sudo rm -rf {home}\n"
        )
        return 1
    env.out.write(f"Deleted {name} and their private data{_by_server(by_server)}.\n")
    return 0


async def cmd_plugin_install(args: argparse.Namespace, env: Env) -> int:
    from skald.features.plugins import install as wheels
    from skald.store.plugins import PluginStore

    paths = [(Path(w), Path(w).name) for w in args.wheels]
    for path, _ in paths:
        if not path.is_file():
            raise UsageError(f"no such file: {path}")
    plan = await asyncio.to_thread(wheels.inspect_upload, paths)

    async def run(core: Core) -> int:
        await asyncio.to_thread(wheels.install, plan, env.layout.plugins_dir)
        await PluginStore(core.registry.db).ensure([plan.id])
        env.out.write(f"Installed {plan.id} {plan.plugin.version}; it loads at the next start.\n")
        return 0

    return await _with_core(env, run)


async def cmd_plugin_list(args: argparse.Namespace, env: Env) -> int:
    async def run(core: Core) -> int:
        switches = core.plugins.switches
        for pid, loaded in sorted(switches.known.items()):
            state = "failed" if loaded.error else ("on" if switches.enabled(pid) else "off")
            line = f"{pid}  {loaded.version or '-'}  {loaded.source}  {state}"
            env.out.write(line + (f"  ({loaded.error})" if loaded.error else "") + "\n")
        return 0

    return await _with_core(env, run)


async def cmd_plugin_switch(args: argparse.Namespace, env: Env) -> int:
    from skald.store.plugins import PluginStore

    async def run(core: Core) -> int:
        store = PluginStore(core.registry.db)
        if await store.get(args.id) is None:
            raise UsageError(f"no plugin named {args.id!r}")
        await store.set_enabled(args.id, args.on)
        env.out.write(f"{args.id} is switched {'on' if args.on else 'off'}.\n")
        return 0

    return await _with_core(env, run)


async def cmd_plugin_remove(args: argparse.Namespace, env: Env) -> int:
    from skald.features.plugins import install as wheels
    from skald.store.plugins import PluginStore

    async def run(core: Core) -> int:
        removed = await asyncio.to_thread(wheels.uninstall, env.layout.plugins_dir, args.id)
        if not removed and not args.purge:
            raise UsageError(f"no plugin {args.id!r} is installed in {env.layout.plugins_dir}")
        if args.purge:
            await PluginStore(core.registry.db).purge(args.id)
        kept = "" if args.purge else " (its settings and grants are kept)"
        env.out.write(f"Removed {args.id}{kept}; it is gone at the next start.\n")
        return 0

    return await _with_core(env, run)


async def cmd_serve(args: argparse.Namespace, env: Env) -> int:
    from skald.features.backups.restart import RESTART, exec_again
    from skald.server import serve

    host = args.host or env.config.server.host
    port = args.port or env.config.server.port
    code = await serve(env.layout, env.config, host, port)
    if code == RESTART:  # restored a backup on request: start afresh, config and all
        exec_again()
    return code


def _chat_token(args: argparse.Namespace, env: Env) -> str | None:
    """The API token: --token-file, else $SKALD_TOKEN; None: sign in with a password."""
    if args.token_file:
        try:
            token = Path(args.token_file).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise SkaldError(
                f"cannot read the token file {args.token_file}: {exc.strerror}"
            ) from None
        if not token:
            raise SkaldError(f"the token file {args.token_file} is empty")
        return token
    return env.environ.get("SKALD_TOKEN") or None


def _check_files(paths: list[str]) -> None:
    for path in paths:
        if not Path(path).is_file():
            raise UsageError(f"no such file: {path}")


async def cmd_chat(args: argparse.Namespace, env: Env) -> int:
    """One turn through a running server's `POST /api/chat`: as a member signing in
    with a password, or with an API token (`--token-file`, `SKALD_TOKEN`) from any
    machine. Exit codes: 0 done, 3 waiting for an approval, 1 otherwise."""
    import httpx

    from skald.features.tokens.chat_client import ChatClient

    token = _chat_token(args, env)
    _check_files(args.file)
    if token is None and not args.user:
        raise UsageError(
            "give --user NAME (and a password), or an API token (--token-file, SKALD_TOKEN)"
        )
    password = None if token else env.secrets.get(args.password_stdin, f"password for {args.user}")
    text = env.secrets.rest() if args.text == "-" else args.text
    if not text.strip() and not args.file:
        raise UsageError("the message is empty")
    base = args.url or f"http://127.0.0.1:{env.config.server.port}"
    try:
        async with ChatClient(base, token) as chat:
            if password is not None:
                await chat.login(args.user, password)
            out = await chat.send(
                text,
                conversation=args.conversation,
                files=[Path(f) for f in args.file],
                stream=env.out if args.stream else None,
            )
            saved = await chat.fetch(out["files"], Path(args.out)) if args.out else []
            if password is not None:
                await chat.logout()
    except httpx.TransportError as exc:
        raise SkaldError(
            f"cannot reach the Skald server at {base} ({exc.__class__.__name__}); is it running?"
        ) from None
    if out["reply"] and not args.stream:
        env.out.write(out["reply"].rstrip() + "\n")
    for path in saved:
        print(f"skald: saved {path}", file=sys.stderr)
    for path in out["files"] if not args.out else []:
        print(f"skald: wrote {path} ({base}/api/file?path={path})", file=sys.stderr)
    print(f"skald: conversation {out['conversation_id']}: {out['status']}", file=sys.stderr)
    if out["status"] == "failed":
        detail = out.get("error_detail")  # only for members who manage models
        error = out.get("error") or "the turn failed"
        raise SkaldError(f"{error} ({detail})" if detail else error)
    return 3 if out["status"] == "awaiting_approval" else 0


async def _token_user(core: Core, name: str) -> str:
    user = await core.registry.find_user(check_username(name))
    if user is None:
        raise SkaldError(f"no user named {name!r}")
    return user.id


def _token_service(core: Core) -> Any:
    from skald.core.sealing import InstanceKey
    from skald.features.tokens.service import TokensConfig, TokenService, hash_key
    from skald.features.tokens.store import TokenStore

    InstanceKey.load_or_create(core.layout.instance_key)  # the server makes it at start
    return TokenService(
        TokenStore(core.registry.db), hash_key(core.layout.instance_key), TokensConfig()
    )


async def cmd_token_create(args: argparse.Namespace, env: Env) -> int:
    import time

    async def run(core: Core) -> int:
        user_id = await _token_user(core, args.user)
        expires = time.time() + args.expires_days * 86400 if args.expires_days else None
        token, info = await _token_service(core).create(user_id, args.name, args.scope, expires)
        env.out.write(
            f"Created the API token {info.name!r} ({', '.join(info.scopes)}) for {args.user}; "
            "it is shown only this once:\n\n"
            f"    {token}\n\n"
        )
        return 0

    return await _with_core(env, run)


async def cmd_token_list(args: argparse.Namespace, env: Env) -> int:
    async def run(core: Core) -> int:
        tokens = await _token_service(core).list(await _token_user(core, args.user))
        if args.json:
            env.out.write(msgspec.json.encode(tokens).decode() + "\n")
            return 0
        for t in tokens:
            expires = "never" if t.expires_at is None else _when(t.expires_at)
            used = "never" if t.last_used_at is None else _when(t.last_used_at)
            env.out.write(
                f"{t.id}  {t.name}  {','.join(t.scopes)}  created {_when(t.created_at)}  "
                f"last used {used}  expires {expires}\n"
            )
        return 0

    return await _with_core(env, run)


def _when(seconds: float) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")


async def cmd_token_revoke(args: argparse.Namespace, env: Env) -> int:
    async def run(core: Core) -> int:
        await _token_service(core).revoke(await _token_user(core, args.user), args.id)
        env.out.write(f"Revoked the API token {args.id}; the next request with it is refused.\n")
        return 0

    return await _with_core(env, run)


async def cmd_backup(args: argparse.Namespace, env: Env) -> int:
    """A backup archive, written by the running server if there is one (it holds the
    keys of unlocked members), else directly; with --drill, then the restore drill."""
    import time

    from skald.features.backups.backup import backup_command

    started = time.monotonic()
    out = Path(args.out) if args.out else None
    if out is None and args.drill:
        from skald.features.backups.scheduler import load_settings

        out = load_settings(env.layout).target(env.layout)
    result, by_server = await backup_command(env.layout, env.config, quick=args.quick, out=out)
    how = "by the running server" if by_server else "directly (no server running)"
    env.out.write(
        f"Backup written: {result.path}\n"
        f"  {result.files} files, {result.bytes / 1e6:.1f} MB, "
        f"{time.monotonic() - started:.1f} s, {how}\n"
    )
    if result.skipped:
        env.out.write(
            f"  {result.skipped} item(s) left out: listed under 'skipped' in backup.json\n"
        )
    if args.drill:
        from skald.features.backups.scheduler import drill_command

        drill = await drill_command(env.layout, env.config)
        for db in drill.databases:
            who = f" ({db.username})" if db.username else ""
            env.out.write(f"  {db.status:<6} {db.path}{who}: {db.detail}\n")
        if not drill.ok:
            raise SkaldError(f"the restore drill failed: {drill.error}")
        env.out.write(
            f"Restore drill passed: {drill.archive}, {drill.files} files match their digests, "
            f"{sum(d.status == 'ok' for d in drill.databases)} database(s) open and intact\n"
        )
    return 0


async def cmd_restore(args: argparse.Namespace, env: Env) -> int:
    from skald.features.backups.archive import CheckedArchive
    from skald.features.backups.restore import RestorePlan, describe, restore_command

    def confirm(checked: CheckedArchive, plan: RestorePlan) -> bool:
        env.out.write(f"Archive: {checked.path}\n  {describe(checked)}\n")
        env.out.write(f"Restore into: {env.layout.root}\n")
        if plan.replace:
            env.out.write(
                f"  moved aside to {env.layout.backups_dir}/replaced-<time>/: "
                f"{', '.join(plan.replace)}\n"
            )
        env.out.flush()
        if args.yes:
            return True
        try:
            os.close(os.open("/dev/tty", os.O_RDWR))
        except OSError:
            raise UsageError(
                "no terminal to confirm the restore: add --yes; nothing was changed"
            ) from None
        return _ask_line("Restore now? Type yes to go ahead", "no").strip().lower() == "yes"

    sandbox = env.config.sandbox
    docker_host = sandbox.docker_host if sandbox.enabled else None
    result = await restore_command(env.layout, Path(args.archive), confirm, docker_host)
    if result is None:
        raise SkaldError("restore cancelled; nothing was changed")
    m = result.manifest
    env.out.write(f"Restored the {m.kind} backup of {m.created} ({result.files} files).\n")
    if result.replaced is not None:
        env.out.write(f"What it replaced is kept in {result.replaced}\n")
    if result.sandboxes_stopped:
        env.out.write(
            f"Stopped {result.sandboxes_stopped} sandbox(es); Skald starts them again on "
            "the restored home folders.\n"
        )
    if result.sandbox_warning:
        print(f"skald: warning: {result.sandbox_warning}", file=sys.stderr)
    env.out.write("Start Skald again: systemctl --user start skald\n")
    return 0


async def cmd_image_build(args: argparse.Namespace, env: Env) -> int:
    """Build the runtime image every member's sandbox runs (no data directory needed)."""
    from skald.sandbox import image
    from skald.sandbox.client import connect

    if args.if_missing and not env.config.sandbox.enabled:
        env.out.write("The sandbox is turned off (sandbox.enabled = false): no image needed\n")
        return 0
    client = await asyncio.to_thread(connect, env.config.sandbox.docker_host)
    try:
        tag = image.image_tag()
        if args.if_missing and await asyncio.to_thread(image.has_image, client, tag):
            env.out.write(f"The sandbox image {tag} is already there\n")
            return 0
        base = await asyncio.to_thread(image.pick_base, client, args.base)
        env.out.write(f"Building {tag} from {base}\n")
        env.out.flush()
        if args.log:
            await _build_logged(image, client, base, tag, Path(args.log), env.out)
            return 0

        def progress(line: str) -> None:
            env.out.write(line if line.endswith("\n") else line + "\n")
            env.out.flush()

        await asyncio.to_thread(image.build_image, client, base=base, tag=tag, progress=progress)
    finally:
        client.close()
    env.out.write(f"Built {tag}\n")
    return 0


async def _build_logged(
    image: Any, client: Any, base: str, tag: str, log_path: Path, out: TextIO
) -> None:
    """The build with Docker's output in `log_path` and one progress line on `out`."""
    from skald.ops.build_progress import ProgressLine

    def build() -> None:
        with log_path.open("a", encoding="utf-8") as log:
            line = ProgressLine(out, log, tty=out.isatty())
            try:
                image.build_image(client, base=base, tag=tag, progress=line.feed)
            except BaseException:
                line.close(ok=False)
                raise
            line.close(ok=True)

    try:
        await asyncio.to_thread(build)
    except SkaldError as exc:
        raise SkaldError(f"{exc} (the whole build output is in {log_path})") from None


async def cmd_image_bootstrap_base(args: argparse.Namespace, env: Env) -> int:
    """debootstrap a minimal Debian trixie and import it as a local base image."""
    from skald.sandbox import image
    from skald.sandbox.client import connect

    mirror = args.mirror or image.apt_mirror()
    if not mirror:
        raise UsageError("no Debian mirror found in /etc/apt: pass --mirror URL")
    client = await asyncio.to_thread(connect, env.config.sandbox.docker_host)
    try:

        def progress(line: str) -> None:
            env.out.write(line if line.endswith("\n") else line + "\n")
            env.out.flush()

        tag = await asyncio.to_thread(
            image.bootstrap_base, client, mirror=mirror, tag=args.tag, progress=progress
        )
    finally:
        client.close()
    env.out.write(f"Imported {tag}; build with `skald image build --base {tag}`\n")
    return 0


async def cmd_doctor(args: argparse.Namespace, env: Env) -> int:
    from skald.ops.checks_base import Context
    from skald.ops.doctor import run_doctor

    ctx = Context.create(env.layout, env.config, env.environ, env.config_error)
    return await run_doctor(ctx, env.out, as_json=args.json)


async def cmd_status(args: argparse.Namespace, env: Env) -> int:
    from skald.ops.status import run_status

    return await run_status(env.layout, env.config, env.environ, env.out, as_json=args.json)


def run_update(args: argparse.Namespace, environ: dict[str, str]) -> int:
    """Replace this process with `$SKALD_HOME/update.sh ARGS...` (needs no data or config,
    so it also heals an install whose configuration or version no longer starts)."""
    from skald.ops.install_root import InstallRoot

    root = InstallRoot.from_environ(environ)
    script = root.update_script
    if not script.is_file():
        raise SkaldError(
            f"no {script}: this Skald is not installed there (running from a checkout?); "
            f"install with: {root.installer_command()}"
        )
    argv = [str(script), *args.update_args]
    if not os.access(script, os.X_OK):
        import shutil

        argv = [shutil.which("bash", path=environ.get("PATH")) or "/bin/bash", *argv]
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(argv[0], argv, {**environ, "SKALD_HOME": str(root.root)})  # noqa: S606
    return 1  # not reached


# -- the parser ---------------------------------------------------------------------


def _data_option(parser: argparse.ArgumentParser, default: object) -> None:
    parser.add_argument(
        "--data",
        metavar="DIR",
        default=default,
        help="data directory (default: $SKALD_HOME/data, else ~/.local/share/skald/data)",
    )


def _stdin_flag(
    p: argparse.ArgumentParser,
    flag: str = "--password-stdin",
    help_text: str = "read the password as one line from stdin",
) -> None:
    """A secret read from stdin instead of asked at the terminal (`Secrets.get`): what a
    script passes, since `_require_tty` refuses to ask without a terminal."""
    p.add_argument(flag, action="store_true", help=help_text)


def build_parser() -> SkaldArgumentParser:
    parser = SkaldArgumentParser(
        prog="skald", description="Skald, the household's private assistant."
    )
    _data_option(parser, None)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(
        name: str, help_text: str, parent: argparse._SubParsersAction[SkaldArgumentParser] = sub
    ) -> SkaldArgumentParser:
        p = parent.add_parser(name, help=help_text, description=help_text)
        # Also accepted after the command; SUPPRESS keeps the top-level value otherwise.
        _data_option(p, argparse.SUPPRESS)
        p.set_defaults(_prog=p.prog)  # the deepest command wins: errors name it
        return p

    command("version", "print the version").set_defaults(handler=None, local="version")
    command("selftest", "check that this build works on this host").set_defaults(
        handler=None, local="selftest"
    )

    p = command("serve", "run the web server (the systemd unit runs this)")
    p.add_argument("--host", help="address to listen on (default: server.host, 0.0.0.0)")
    p.add_argument("--port", type=int, help="port to listen on (default: server.port, 9000)")
    p.set_defaults(handler=cmd_serve)

    p = command("chat", "send one message to the assistant through the running server")
    p.add_argument("text", help="the message, or - to read it from stdin")
    p.add_argument("--user", help="whose assistant to talk to (signing in with a password)")
    p.add_argument(
        "--token-file",
        metavar="PATH",
        help="a file holding an API token (default: $SKALD_TOKEN; without either, --user)",
    )
    p.add_argument(
        "--file", action="append", default=[], metavar="PATH", help="attach a file (repeatable)"
    )
    p.add_argument("--out", metavar="DIR", help="save the files the assistant wrote here")
    p.add_argument("--stream", action="store_true", help="print the answer as it is written")
    _stdin_flag(p)
    p.add_argument(
        "--conversation", metavar="ID", help="continue this conversation (default: a new one)"
    )
    p.add_argument("--url", help="server address (default: http://127.0.0.1:<server.port>)")
    p.set_defaults(handler=cmd_chat)

    token = command("token", "API tokens for scripts, apps and Home Assistant")
    tsub = token.add_subparsers(dest="token_command", metavar="ACTION", required=True)
    p = command("create", "create an API token (printed once)", tsub)
    p.add_argument("--user", required=True, help="whose token it is")
    p.add_argument("--name", required=True, help="what it is for, e.g. 'Home Assistant'")
    p.add_argument(
        "--scope",
        action="append",
        required=True,
        choices=["chat", "files:read", "files:write", "openai"],
        help="what it may do (repeatable)",
    )
    p.add_argument("--expires-days", type=int, metavar="N", help="expire after N days")
    p.set_defaults(handler=cmd_token_create)
    p = command("list", "list a member's API tokens (never the secrets)", tsub)
    p.add_argument("--user", required=True)
    p.add_argument("--json", action="store_true", help="print JSON instead of lines")
    p.set_defaults(handler=cmd_token_list)
    p = command("revoke", "revoke an API token at once", tsub)
    p.add_argument("id", help="the token's id (see `skald token list`)")
    p.add_argument("--user", required=True)
    p.set_defaults(handler=cmd_token_revoke)

    p = command("backup", "write a consistent backup archive of this data directory")
    p.add_argument(
        "--quick",
        action="store_true",
        help="databases, keys and configuration only (no homes or shared folders)",
    )
    p.add_argument(
        "--out",
        metavar="PATH",
        help="archive file or folder (default: <data>/backups/skald-backup-<UTC time>.tar; "
        "with --drill: the scheduled backups' folder)",
    )
    p.add_argument(
        "--drill",
        action="store_true",
        help="then restore the newest backup into a scratch folder and check every database "
        "(the monthly restore drill, now)",
    )
    p.set_defaults(handler=cmd_backup)

    p = command("restore", "replace this stopped instance's data with a backup archive")
    p.add_argument("archive", metavar="ARCHIVE", help="a file written by `skald backup`")
    p.add_argument("--yes", action="store_true", help="restore without asking")
    # A broken config.toml is one thing a restore may be repairing.
    p.set_defaults(handler=cmd_restore, tolerate_config_error=True)

    p = command("setup", "create the first administrator")
    p.add_argument("--admin", metavar="NAME", help="administrator username (asked if omitted)")
    _stdin_flag(p)
    p.set_defaults(handler=cmd_setup)

    user = command("user", "manage accounts")
    usub = user.add_subparsers(dest="user_command", metavar="ACTION", required=True)

    p = command("add", "create an account (its role decides whether it is encrypted)", usub)
    p.add_argument("name")
    p.add_argument("--role", required=True, help="role name, e.g. admin, member, children")
    p.add_argument("--display-name", help="name shown in the interface")
    _stdin_flag(p)
    p.set_defaults(handler=cmd_user_add)

    p = command("list", "list accounts", usub)
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(handler=cmd_user_list)

    p = command("passwd", "set a new password", usub)
    p.add_argument("name")
    _stdin_flag(p, help_text="read the password(s) from stdin, one per line")
    p.add_argument(
        "--with-current",
        action="store_true",
        help="give the current password first (required for encrypted accounts)",
    )
    p.set_defaults(handler=cmd_user_passwd)

    p = command("recover", "reset a forgotten password with the recovery code", usub)
    p.add_argument("name")
    _stdin_flag(p, "--recovery-code-stdin", "read the recovery code from stdin (first line)")
    _stdin_flag(p, help_text="read the new password from stdin (next line)")
    p.set_defaults(handler=cmd_user_recover)

    p = command("deactivate", "lock an account out now (data kept)", usub)
    p.add_argument("name")
    p.set_defaults(handler=cmd_user_deactivate)

    p = command("activate", "let a deactivated account log in again", usub)
    p.add_argument("name")
    p.set_defaults(handler=cmd_user_activate)

    p = command("delete", "delete an account and its private data", usub)
    p.add_argument("name")
    p.add_argument("--yes", action="store_true", help="confirm: this cannot be undone")
    p.set_defaults(handler=cmd_user_delete)

    plug = command("plugin", "install, list, switch and remove plugins")
    psub = plug.add_subparsers(dest="plugin_command", metavar="ACTION", required=True)
    p = command("install", "install a plugin from its wheel (and its dependencies' wheels)", psub)
    p.add_argument("wheels", nargs="+", metavar="WHEEL")
    p.set_defaults(handler=cmd_plugin_install)
    p = command("list", "list the plugins and their state", psub)
    p.set_defaults(handler=cmd_plugin_list)
    for name, on in (("enable", True), ("disable", False)):
        p = command(name, f"switch a plugin {'on' if on else 'off'} (at once)", psub)
        p.add_argument("id")
        p.set_defaults(handler=cmd_plugin_switch, on=on)
    p = command("remove", "remove an installed plugin (its data stays unless --purge)", psub)
    p.add_argument("id")
    p.add_argument("--purge", action="store_true", help="also forget its settings and grants")
    p.set_defaults(handler=cmd_plugin_remove)

    img = command("image", "the sandboxes' runtime image")
    isub = img.add_subparsers(dest="image_command", metavar="ACTION", required=True)
    p = command("build", "build the runtime image (needs Docker)", isub)
    p.add_argument(
        "--base",
        metavar="IMAGE",
        help="base image (default: debian:trixie-slim, or skald-base:trixie when only that "
        "one is present)",
    )
    p.add_argument(
        "--if-missing",
        action="store_true",
        help="do nothing when the image is already there, or the sandbox is turned off "
        "(the installer uses it)",
    )
    p.add_argument(
        "--log",
        metavar="FILE",
        help="write Docker's whole output to FILE and show one progress line instead",
    )
    p.set_defaults(handler=cmd_image_build)
    p = command(
        "bootstrap-base", "make a local base image with debootstrap (root, no registry)", isub
    )
    p.add_argument("--mirror", metavar="URL", help="Debian mirror (default: the one apt uses)")
    p.add_argument("--tag", default="skald-base:trixie", help="image name to import as")
    p.set_defaults(handler=cmd_image_bootstrap_base)

    p = command("privacy", "a member's privacy self-check, read from the files (counts only)")
    p.add_argument("name")
    p.add_argument("--json", action="store_true", help="print JSON instead of lines")
    p.set_defaults(handler=cmd_privacy)

    p = command("doctor", "check this machine and the data directory; say how to fix problems")
    p.add_argument("--json", action="store_true", help="print JSON instead of lines")
    p.set_defaults(handler=cmd_doctor, tolerate_config_error=True)

    p = command("status", "service state, installed and running version, users, containers")
    p.add_argument("--json", action="store_true", help="print JSON instead of lines")
    p.set_defaults(handler=cmd_status)

    # Everything after `update` goes to update.sh untouched (main splits it off first),
    # so `skald update --help` shows the script's own options.
    p = command("update", "update this installation: runs $SKALD_HOME/update.sh [ARGS...]")
    p.set_defaults(handler=None, direct=run_update, update_args=[])
    return parser


def _run_local(name: str, out: TextIO) -> int:
    if name == "version":
        out.write(f"skald {__version__}\n")
        return 0
    from skald.selftest import run_selftest

    return run_selftest(out)


_PASSTHROUGH = ("update",)


def _split_passthrough(argv: list[str]) -> tuple[list[str], list[str] | None]:
    """`[--data DIR] update ARGS...` -> (`[--data DIR] update`, ARGS without a leading
    `--`); (argv, None) for every other command."""
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--data":
            i += 2
        elif arg.startswith("--data="):
            i += 1
        elif arg in _PASSTHROUGH:
            rest = argv[i + 1 :]
            return argv[: i + 1], rest[1:] if rest[:1] == ["--"] else rest
        else:
            break
    return argv, None


def plugin_sections(plugins: PluginsConfig) -> Sections:
    """The config sections of the plugins `[plugins]` names (and the installed ones)."""
    from skald.plugins.manager import Plugins

    return Plugins.load(plugins.modules).config_sections()


def main(
    argv: Sequence[str] | None = None,
    *,
    environ: dict[str, str] | None = None,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
) -> int:
    env_vars = dict(os.environ if environ is None else environ)
    out = stdout or sys.stdout
    try:
        head, passthrough = _split_passthrough(list(sys.argv[1:] if argv is None else argv))
        args = build_parser().parse_args(head)
        if passthrough is not None:
            args.update_args = passthrough
        if getattr(args, "local", None):
            return _run_local(args.local, out)
        if getattr(args, "direct", None):
            return int(args.direct(args, env_vars))
        layout = DataLayout(resolve_data_dir(args.data, env_vars))
        config_error: str | None = None
        try:
            config = load_config(layout.root, env_vars, plugin_sections)
        except ConfigError as exc:
            if not getattr(args, "tolerate_config_error", False):
                raise
            config, config_error = Config(), str(exc)
        configure_logging(config.log.level, config.log.format)
        handler: Handler = args.handler
        env = Env(
            layout=layout,
            config=config,
            secrets=SecretSource(stdin or sys.stdin),
            out=out,
            environ=env_vars,
            config_error=config_error,
        )
        return asyncio.run(handler(args, env))
    except UsageError as exc:
        print(f"skald: {exc}", file=sys.stderr)
        return 2
    except ConfigError as exc:
        # Its own exit code, so systemd can stop restarting a server that cannot start.
        print(f"skald: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except SkaldError as exc:
        print(f"skald: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("skald: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        # Never a traceback for a person; the details go to the log at debug level.
        log.debug("unexpected error", exc_info=True)
        print(f"skald: unexpected error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
