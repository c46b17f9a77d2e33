"""The one configuration struct of Skald, loaded from `config.toml` plus `SKALD_*` variables.

Precedence: built-in defaults < `<data>/config.toml` < environment. The comment above each
field is its documentation; the value after `=` is the documented default.

No module reads the environment on its own: callers pass the mapping (normally
`os.environ`), which also keeps this module trivially testable.
"""

from __future__ import annotations

import ipaddress
import json
import re
import tomllib
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any, Final, Literal, TypeVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import msgspec

from skald.errors import ConfigError

__all__ = [
    "AssistantConfig",
    "AuthConfig",
    "Config",
    "LogConfig",
    "PluginsConfig",
    "SandboxConfig",
    "SecurityConfig",
    "ServerConfig",
    "StorageConfig",
    "env_var_names",
    "expand_path",
    "home_dir",
    "load_config",
    "resolve_data_dir",
]

CONFIG_FILE_NAME = "config.toml"
ENV_PREFIX = "SKALD"


# Every section is immutable, keyword-only and rejects unknown keys (typos must not be
# silently ignored). The options are spelled out on each class because mypy does not
# carry `frozen` over from a Struct base class.


class ServerConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    # Address the web server binds; 0.0.0.0 serves every interface (the household LAN).
    host: str = "0.0.0.0"  # noqa: S104 - listening on the LAN is the product's purpose
    # TCP port of the web UI and API, 1..65535.
    port: Annotated[int, msgspec.Meta(ge=1, le=65535)] = 9000
    # Seconds between keep-alive pings on a live connection (/api/ws); a client that
    # answers none for 2.5 intervals is closed with code 4408.
    heartbeat_s: Annotated[float, msgspec.Meta(ge=0.5, le=300)] = 20.0


class LogConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    # Lowest level written to the log: debug, info, warning or error.
    level: Literal["debug", "info", "warning", "error"] = "info"
    # Log rendering: console (human), json (one object per line), auto (console on a TTY).
    format: Literal["auto", "console", "json"] = "auto"
    # Access log, one line per HTTP request: "all", or "errors" (status 400 and up only).
    access: Literal["all", "errors"] = "all"


class SecurityConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    # Argon2id cost: "default" (memory-hard); "test" is light and accepted only from the
    # SKALD_SECURITY_KDF_PROFILE environment variable, never from config.toml.
    kdf_profile: Literal["default", "test"] = "default"
    # Password checks (Argon2id) running at once (1..8); each holds 256 MiB while it runs.
    kdf_workers: Annotated[int, msgspec.Meta(ge=1, le=8)] = 2
    # Password checks allowed to wait for a free worker (0..64); more are refused with 503.
    kdf_queue: Annotated[int, msgspec.Meta(ge=0, le=64)] = 8


class StorageConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    # How long SQLite waits for a lock held by another connection, in ms (>= 0).
    busy_timeout_ms: Annotated[int, msgspec.Meta(ge=0)] = 5000
    # Storage each member may use (home, uploads and their database), in MiB; 0 means no
    # limit. A role's `storage_quota_mb` attribute overrides it for its members.
    member_quota_mb: Annotated[int, msgspec.Meta(ge=0)] = 10240
    # Free space kept on the data directory's disk, in MiB: below it Skald refuses new
    # writes and pauses the sandboxes until space is freed (0 turns the guard off).
    disk_reserve_mb: Annotated[int, msgspec.Meta(ge=0)] = 1024


class AuthConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    # A login session ends after this many hours without any request (> 0).
    session_idle_hours: Annotated[float, msgspec.Meta(gt=0)] = 24.0 * 14
    # ...and in any case this many days after the login (> 0).
    session_max_days: Annotated[float, msgspec.Meta(gt=0)] = 90.0
    # Failed logins allowed (per account and per client address) before backing off.
    login_free_attempts: Annotated[int, msgspec.Meta(ge=1)] = 5
    # First back-off delay in seconds; it doubles with every further failure.
    login_backoff_base_s: Annotated[float, msgspec.Meta(gt=0)] = 2.0
    # Longest back-off delay in seconds.
    login_backoff_max_s: Annotated[float, msgspec.Meta(gt=0)] = 900.0
    # Mark cookies Secure: "auto" (when the request came over HTTPS), "always" or "never".
    secure_cookies: Literal["auto", "always", "never"] = "auto"


class AssistantConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    # IANA timezone of the household (prompts, schedules), e.g. "Europe/Rome".
    timezone: str = "UTC"
    # Model calls allowed in one turn before the assistant stops and says so (1..200).
    max_rounds: Annotated[int, msgspec.Meta(ge=1, le=200)] = 25
    # Largest upload accepted (chat attachments and the Files API), in MiB (1..4096).
    upload_max_mb: Annotated[int, msgspec.Meta(ge=1, le=4096)] = 64
    # Compact a conversation by itself once it reaches about this many tokens (0 = only
    # when asked with /compact).
    compact_at_tokens: Annotated[int, msgspec.Meta(ge=0)] = 0


class SandboxConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    # Give every member a sandbox container for running commands; false turns it off.
    enabled: bool = True
    # Docker Engine address, e.g. "unix:///var/run/docker.sock" or "tcp://host:2375";
    # empty means the DOCKER_HOST environment variable, else the default socket.
    docker_host: str = ""
    # Runtime image to use instead of the built-in skald-runtime:v<hash> (empty: built-in).
    image: str = ""
    # Memory limit of each container, in MiB (>= 64).
    memory_mb: Annotated[int, msgspec.Meta(ge=64)] = 2048
    # Most processes (and threads) at once in each container (>= 16).
    pids: Annotated[int, msgspec.Meta(ge=16)] = 512
    # CPU share of each container, in cores (> 0; 1.5 = one and a half cores).
    cpus: Annotated[float, msgspec.Meta(gt=0)] = 2.0
    # Time limit of one command in seconds, unless the assistant asks for another (>= 1).
    command_timeout_s: Annotated[int, msgspec.Meta(ge=1)] = 120
    # The longest time limit the assistant may ask for, in seconds (>= 1).
    command_timeout_max_s: Annotated[int, msgspec.Meta(ge=1)] = 1800
    # Output of one command kept for the assistant, in KiB (the rest is cut).
    output_max_kb: Annotated[int, msgspec.Meta(ge=1, le=10240)] = 64
    # IPv4 range the members' sandbox networks are carved from (one small subnet per
    # member with network access; Docker's default pools are never used). Must not
    # overlap a route of this host.
    subnet_pool: str = "10.213.0.0/16"
    # Size of each member's subnet, as a prefix length (29 = 8 addresses; 16..29).
    subnet_prefix: Annotated[int, msgspec.Meta(ge=16, le=29)] = 28
    # Let the sandboxes reach Skald's own web server (through their network's gateway,
    # from addresses of subnet_pool); false: such requests are refused with 403.
    allow_skald_access: bool = False

    def __post_init__(self) -> None:
        try:
            pool = ipaddress.IPv4Network(self.subnet_pool)
        except ValueError:
            raise ValueError(
                f"sandbox.subnet_pool: {self.subnet_pool!r} is not an IPv4 network "
                '(e.g. "10.213.0.0/16")'
            ) from None
        if pool.prefixlen > self.subnet_prefix:
            raise ValueError(
                f"sandbox.subnet_prefix /{self.subnet_prefix} is larger than the pool "
                f"{self.subnet_pool}"
            )


# What a plugin adds to the config: section name -> its struct (the config-sections hook).
Sections = Mapping[str, type[msgspec.Struct]]
S = TypeVar("S", bound=msgspec.Struct)
_NOT_TABLES: Final = frozenset({"extensions"})


class PluginsConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    # Python modules to load as plugins, besides the installed packages that declare a
    # `skald` entry point, e.g. ["skald_weather"].
    modules: list[str] = msgspec.field(default_factory=list)


class Config(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    # [server]: HTTP listener.
    server: ServerConfig = msgspec.field(default_factory=ServerConfig)
    # [log]: logging level and format.
    log: LogConfig = msgspec.field(default_factory=LogConfig)
    # [security]: key-derivation cost.
    security: SecurityConfig = msgspec.field(default_factory=SecurityConfig)
    # [storage]: SQLite tuning, quotas and the free-disk reserve.
    storage: StorageConfig = msgspec.field(default_factory=StorageConfig)
    # [auth]: login sessions and throttling.
    auth: AuthConfig = msgspec.field(default_factory=AuthConfig)
    # [assistant]: the chat and the agents.
    assistant: AssistantConfig = msgspec.field(default_factory=AssistantConfig)
    # [sandbox]: the members' command containers.
    sandbox: SandboxConfig = msgspec.field(default_factory=SandboxConfig)
    # [plugins]: more features to load.
    plugins: PluginsConfig = msgspec.field(default_factory=PluginsConfig)
    # Not a table of config.toml: the plugins' own sections (`[name]`), each checked by
    # the plugin's struct. Read them with `section()`.
    extensions: dict[str, Any] = msgspec.field(default_factory=dict)

    def section(self, name: str, struct: type[S]) -> S:
        """A plugin's section as its struct (its defaults when config.toml has none)."""
        found = self.extensions.get(name)
        if isinstance(found, struct):
            return found
        return msgspec.convert({}, type=struct)


# --------------------------------------------------------------------------- environment


def _is_section(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, msgspec.Struct)


def _leaf_fields(
    struct: type[msgspec.Struct], prefix: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], Any]]:
    """Every scalar field as (path, type), found by walking the structs, never by names."""
    out: list[tuple[tuple[str, ...], Any]] = []
    for field in msgspec.structs.fields(struct):
        if not prefix and field.name in _NOT_TABLES:
            continue
        path = (*prefix, field.name)
        if _is_section(field.type):
            out.extend(_leaf_fields(field.type, path))
        else:
            out.append((path, field.type))
    return out


def _env_name(path: tuple[str, ...]) -> str:
    return "_".join((ENV_PREFIX, *path)).upper()


def env_var_names() -> dict[str, str]:
    """Map `SKALD_SECTION_KEY` -> `section.key` for every setting (for docs and `doctor`)."""
    return {_env_name(path): ".".join(path) for path, _ in _leaf_fields(Config)}


def _env_overlay(environ: Mapping[str, str]) -> dict[str, Any]:
    """Typed values from `SKALD_<SECTION>_<KEY>` variables, nested like the TOML file."""
    overlay: dict[str, Any] = {}
    for path, tp in _leaf_fields(Config):
        name = _env_name(path)
        if name not in environ:
            continue
        raw = environ[name]
        try:
            # strict=False turns "9100" into 9100 and "true" into True; lists are
            # comma-separated ("a,b").
            given: Any = (
                [p.strip() for p in raw.split(",") if p.strip()] if tp == list[str] else raw
            )
            value = msgspec.convert(given, type=tp, strict=False)
        except msgspec.ValidationError as exc:
            detail = _humanize(_split_validation(str(exc))[0], raw, tp)
            raise ConfigError(f"environment variable {name}: {detail}") from None
        node = overlay
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = value
    return overlay


# --------------------------------------------------------------------------- file errors

_AT_PATH = re.compile(r"^(?P<msg>.*?) - at `\$(?P<path>[^`]*)`$", re.DOTALL)
_UNKNOWN = re.compile(r"^Object contains unknown field `(?P<name>[^`]+)`$")
_EXPECTED = re.compile(r"^Expected `(?P<want>[^`]+)`(?P<rest>.*?)(?:, got `[^`]+`)?$")
_TOML_AT = re.compile(r"\s*\(at line (?P<line>\d+), column (?P<col>\d+)\)$")
_TYPE_WORDS = {
    "int": "an integer",
    "str": "a string",
    "bool": "a boolean (true or false)",
    "float": "a number",
    "object": "a table",
    "array": "an array",
}


def _split_validation(message: str) -> tuple[str, list[str]]:
    """Split a msgspec message into its text and the key path (`$.a.b` -> ['a', 'b'])."""
    m = _AT_PATH.match(message)
    if not m:
        return message, []
    path = [p for p in m["path"].split(".") if p]
    return m["msg"], path


def _show(value: Any) -> str:
    """A value as the user wrote it in TOML (strings quoted, booleans lower case)."""
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return str(value)


def _humanize(message: str, value: Any, tp: Any) -> str:
    """Reword a msgspec message for a person, quoting the offending value."""
    if message.startswith("Invalid enum value"):
        allowed = ", ".join(_show(a) for a in typing.get_args(tp))
        return f"expected one of {allowed}, got {_show(value)}"
    m = _EXPECTED.match(message)
    if m:
        want = _TYPE_WORDS.get(m["want"], f"`{m['want']}`")
        return f"expected {want}{m['rest']}, got {_show(value)}"
    return message


def _lookup(data: Any, path: list[str], root: Any = Config) -> tuple[Any, Any]:
    """The value found at `path` in the parsed file and the declared type of that key."""
    value: Any = data
    tp: Any = root
    for part in path:
        value = value.get(part) if isinstance(value, dict) else None
        if _is_section(tp):
            tp = next((f.type for f in msgspec.structs.fields(tp) if f.name == part), None)
    return value, tp


_HEADER = re.compile(r"^\s*\[(?!\[)\s*(?P<name>[^\]]+?)\s*\]")
_ARRAY_HEADER = re.compile(r"^\s*\[\[")
_ASSIGN = re.compile(r"^\s*(?P<key>[A-Za-z0-9_\-.\s\"']+?)\s*=")


def _norm_key(text: str) -> str:
    """`server . "port"` -> `server.port` (good enough for the keys Skald defines)."""
    return ".".join(p.strip().strip("\"'") for p in text.split("."))


def _find_line(text: str, dotted: str) -> int | None:
    """1-based line where `dotted` (e.g. `server.port`) is set or its table opens."""
    table = ""
    best: int | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        if _ARRAY_HEADER.match(line):
            table = "\0"  # inside an array of tables: nothing of ours lives there
            continue
        header = _HEADER.match(line)
        if header:
            table = _norm_key(header["name"])
            if table == dotted or table.startswith(dotted + "."):
                return number  # an unknown [section] or [section.sub]
            continue
        assign = _ASSIGN.match(line)
        if not assign or table == "\0":
            continue
        full = _norm_key(assign["key"])
        if table:
            full = f"{table}.{full}"
        if full == dotted or full.startswith(dotted + "."):
            return number  # the key itself, or an unknown table given as `a.b = 1`
        # `server = { port = 1 }`: point at the inline table if nothing better is found.
        if best is None and dotted.startswith(full + "."):
            best = number
    return best


def _file_error(
    path: Path, text: str, data: Any, message: str, section: str | None = None, root: Any = Config
) -> ConfigError:
    """A validation error as `file line N: key: what is wrong`; `section`: the error was
    met validating that plugin section (`data` is the section, `root` its struct)."""
    msg, inner = _split_validation(message)
    key_path = inner if section is None else [section, *inner]
    unknown = _UNKNOWN.match(msg)
    if unknown:
        key_path = [*key_path, unknown["name"]]
        inner = [*inner, unknown["name"]]
    dotted = ".".join(key_path)
    line = _find_line(text, dotted) if dotted else None
    where = f"{path} line {line}" if line else str(path)
    if unknown:
        return ConfigError(f"{where}: unknown key {dotted}")
    value, tp = _lookup(data, inner, root)
    detail = _humanize(msg, value, tp)
    return ConfigError(f"{where}: {dotted}: {detail}" if dotted else f"{where}: {detail}")


# --------------------------------------------------------------------------- loading


def _read_file(path: Path) -> tuple[str, dict[str, Any]]:
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not valid UTF-8 text") from None
    try:
        return text, tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # Python 3.11 only reports the position inside the message: lift it out.
        message = str(exc)
        m = _TOML_AT.search(message)
        if m:
            reason = message[: m.start()]
            where = f"{path} line {m['line']}"
            raise ConfigError(f"{where}: invalid TOML: {reason} (column {m['col']})") from None
        raise ConfigError(f"{path}: invalid TOML: {message}") from None


def load_config(
    data_dir: Path,
    environ: Mapping[str, str],
    sections: Callable[[PluginsConfig], Sections] | None = None,
) -> Config:
    """Defaults, overlaid by `<data_dir>/config.toml` if present, overlaid by `SKALD_*`.

    `sections` gives the plugins' own sections once `[plugins]` is known (the CLI passes
    the plugin loader); a table of the file that neither Skald nor a plugin owns is an
    unknown key, as before.
    """
    path = data_dir / CONFIG_FILE_NAME
    text, data = _read_file(path) if path.is_file() else ("", {})
    own = {f.name for f in msgspec.structs.fields(Config)} - _NOT_TABLES
    others = {k: data.pop(k) for k in [k for k in data if k not in own]}

    # Validate the file on its own first, so its errors carry its line numbers and are
    # reported even when an environment variable happens to override the bad key.
    try:
        from_file = msgspec.convert(data, type=Config)
    except msgspec.ValidationError as exc:
        raise _file_error(path, text, data, str(exc)) from None
    known = sections(from_file.plugins) if sections is not None and others else {}
    extensions: dict[str, Any] = {}
    for name, value in others.items():
        struct = known.get(name)
        if struct is None:
            line = _find_line(text, name)
            where = f"{path} line {line}" if line else str(path)
            raise ConfigError(f"{where}: unknown key {name}")
        try:
            extensions[name] = msgspec.convert(value, type=struct)
        except msgspec.ValidationError as exc:
            raise _file_error(path, text, value, str(exc), section=name, root=struct) from None
    if from_file.security.kdf_profile == "test":
        line = _find_line(text, "security.kdf_profile")
        where = f"{path} line {line}" if line else str(path)
        raise ConfigError(
            f'{where}: security.kdf_profile: "test" is the light KDF profile for tests only '
            "and is accepted only from the environment variable SKALD_SECURITY_KDF_PROFILE"
        )

    # Every value was already checked; converting once more builds the frozen structs.
    merged = _merge(data, _env_overlay(environ))
    # Docker's own variable, as every Docker client honours it, unless Skald's is set.
    if not merged.get("sandbox", {}).get("docker_host") and environ.get("DOCKER_HOST"):
        merged = _merge(merged, {"sandbox": {"docker_host": environ["DOCKER_HOST"]}})
    try:
        config = msgspec.convert(merged, type=Config)
    except msgspec.ValidationError as exc:  # a check across fields (__post_init__)
        raise ConfigError(f"SKALD_* variables: {_split_validation(str(exc))[0]}") from None
    _check_timezone(config.assistant.timezone, path, text)
    return msgspec.structs.replace(config, extensions=extensions) if extensions else config


def _check_timezone(name: str, path: Path, text: str) -> None:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        line = _find_line(text, "assistant.timezone")
        where = f"{path} line {line}" if line else "SKALD_ASSISTANT_TIMEZONE"
        raise ConfigError(
            f'{where}: assistant.timezone: unknown timezone "{name}" (e.g. "Europe/Rome")'
        ) from None


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Deep merge of two nested dicts, `over` winning; neither input is modified."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def home_dir(environ: Mapping[str, str]) -> Path:
    # Prefer the caller's HOME so tests and services decide; fall back to the passwd entry.
    home = environ.get("HOME")
    return Path(home) if home else Path.home()


def expand_path(value: str, environ: Mapping[str, str]) -> Path:
    """VALUE with a leading `~` taken from ENVIRON's HOME (not the process's)."""
    if value == "~" or value.startswith("~/"):
        return home_dir(environ) / value[2:]
    return Path(value).expanduser()


def resolve_data_dir(cli_value: str | None, environ: Mapping[str, str]) -> Path:
    """Data directory: `--data` wins, then `$SKALD_HOME/data`, then the per-user default."""
    if cli_value:
        path = expand_path(cli_value, environ)
    elif environ.get("SKALD_HOME"):
        path = expand_path(environ["SKALD_HOME"], environ) / "data"
    else:
        path = home_dir(environ) / ".local" / "share" / "skald" / "data"
    return path.resolve()
