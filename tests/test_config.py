"""Configuration loading, error messages, data directory resolution and layout."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import msgspec
import pytest

from skald.config import (
    Config,
    LogConfig,
    SecurityConfig,
    ServerConfig,
    StorageConfig,
    env_var_names,
    load_config,
    resolve_data_dir,
)
from skald.errors import ConfigError
from skald.paths import DataLayout, secure_file


def write(data_dir: Path, text: str) -> Path:
    path = data_dir / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def refusal(data_dir: Path, text: str) -> tuple[Path, str]:
    """Writes a config file that loading must refuse; returns its path and the error's message."""
    path = write(data_dir, text)
    with pytest.raises(ConfigError) as info:
        load_config(data_dir, {})
    return path, str(info.value)


def test_defaults_without_a_file(tmp_path: Path) -> None:
    config = load_config(tmp_path, {})
    assert config == Config()
    assert config.server.host == "0.0.0.0"  # noqa: S104 - the documented default
    assert config.server.port == 9000
    assert config.log == LogConfig(level="info", format="auto")
    assert config.security == SecurityConfig(kdf_profile="default")
    assert config.storage == StorageConfig(busy_timeout_ms=5000)


def test_config_is_frozen() -> None:
    with pytest.raises(AttributeError):
        Config().server.port = 1  # type: ignore[misc]


def test_values_from_the_file(tmp_path: Path) -> None:
    write(
        tmp_path,
        '[server]\nhost = "127.0.0.1"\nport = 9100\n\n[log]\nlevel = "debug"\nformat = "json"\n',
    )
    config = load_config(tmp_path, {})
    assert config.server == ServerConfig(host="127.0.0.1", port=9100)
    assert config.log == LogConfig(level="debug", format="json")
    assert config.storage == StorageConfig()


def test_dotted_keys_at_top_level(tmp_path: Path) -> None:
    write(tmp_path, "server.port = 9200\nstorage.busy_timeout_ms = 0\n")
    config = load_config(tmp_path, {})
    assert config.server.port == 9200
    assert config.storage.busy_timeout_ms == 0


def test_environment_overrides_the_file(tmp_path: Path) -> None:
    write(tmp_path, '[server]\nport = 9100\nhost = "127.0.0.1"\n[log]\nformat = "console"\n')
    env = {
        "SKALD_SERVER_PORT": "9300",
        "SKALD_LOG_FORMAT": "json",
        "SKALD_STORAGE_BUSY_TIMEOUT_MS": "250",
        "UNRELATED": "x",
    }
    config = load_config(tmp_path, env)
    assert config.server.port == 9300
    assert config.server.host == "127.0.0.1"  # untouched keys keep the file's value
    assert config.log.format == "json"
    assert config.storage.busy_timeout_ms == 250


def test_environment_names_come_from_the_struct() -> None:
    names = env_var_names()
    assert names["SKALD_SERVER_PORT"] == "server.port"
    assert names["SKALD_SECURITY_KDF_PROFILE"] == "security.kdf_profile"
    assert names["SKALD_STORAGE_BUSY_TIMEOUT_MS"] == "storage.busy_timeout_ms"
    assert names["SKALD_AUTH_LOGIN_BACKOFF_BASE_S"] == "auth.login_backoff_base_s"
    assert names["SKALD_SANDBOX_MEMORY_MB"] == "sandbox.memory_mb"
    assert names["SKALD_PLUGINS_MODULES"] == "plugins.modules"
    assert names["SKALD_LOG_ACCESS"] == "log.access"
    assert names["SKALD_SANDBOX_SUBNET_POOL"] == "sandbox.subnet_pool"
    assert names["SKALD_SECURITY_KDF_WORKERS"] == "security.kdf_workers"
    assert names["SKALD_SANDBOX_ALLOW_SKALD_ACCESS"] == "sandbox.allow_skald_access"
    assert len(names) == 35


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("SKALD_SERVER_PORT", "abc"),
        ("SKALD_SERVER_PORT", "70000"),
        ("SKALD_LOG_LEVEL", "verbose"),
        ("SKALD_STORAGE_BUSY_TIMEOUT_MS", "-1"),
    ],
)
def test_bad_environment_value_names_the_variable(tmp_path: Path, name: str, value: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path, {name: value})
    message = str(info.value)
    assert name in message
    assert value in message
    assert "\n" not in message


def test_malformed_toml_names_file_and_line(tmp_path: Path) -> None:
    path, message = refusal(tmp_path, '[server]\nhost = "x"\nport = = 3\n')
    assert message.startswith(f"{path} line 3: ")
    assert "invalid TOML" in message


def test_out_of_range_and_bad_choice(tmp_path: Path) -> None:
    path = write(tmp_path, "[server]\nport = 70000\n")
    with pytest.raises(ConfigError, match=r"line 2: server\.port: expected an integer <= 65535"):
        load_config(tmp_path, {})
    path, message = refusal(tmp_path, '[log]\nlevel = "loud"\n')
    assert message.startswith(f"{path} line 2: log.level: expected one of ")
    assert '"loud"' in message


def test_test_kdf_profile_refused_in_the_file(tmp_path: Path) -> None:
    path, message = refusal(tmp_path, '[security]\nkdf_profile = "test"\n')
    assert message.startswith(f"{path} line 2: security.kdf_profile")
    assert "SKALD_SECURITY_KDF_PROFILE" in message
    # The environment cannot launder a file that asks for the light profile.
    with pytest.raises(ConfigError):
        load_config(tmp_path, {"SKALD_SECURITY_KDF_PROFILE": "default"})


def test_test_kdf_profile_accepted_from_the_environment(tmp_path: Path) -> None:
    write(tmp_path, '[security]\nkdf_profile = "default"\n')
    config = load_config(tmp_path, {"SKALD_SECURITY_KDF_PROFILE": "test"})
    assert config.security.kdf_profile == "test"


def test_resolve_data_dir_precedence(tmp_path: Path) -> None:
    env = {"SKALD_HOME": str(tmp_path / "install"), "HOME": str(tmp_path / "home")}
    assert resolve_data_dir(str(tmp_path / "cli"), env) == tmp_path / "cli"
    assert resolve_data_dir(None, env) == tmp_path / "install" / "data"
    assert resolve_data_dir(None, {"HOME": str(tmp_path / "home")}) == (
        tmp_path / "home" / ".local" / "share" / "skald" / "data"
    )
    assert resolve_data_dir("~/d", {"HOME": str(tmp_path / "home")}) == tmp_path / "home" / "d"


def test_resolve_data_dir_is_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = resolve_data_dir("rel/data", {})
    assert result.is_absolute()
    assert result == tmp_path.resolve() / "rel" / "data"


def test_config_round_trips_through_msgspec() -> None:
    config = Config(server=ServerConfig(port=1234))
    assert msgspec.convert(msgspec.to_builtins(config), Config) == config


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_layout_paths(tmp_path: Path) -> None:
    layout = DataLayout(tmp_path)
    assert layout.config_file == tmp_path / "config.toml"
    assert layout.system_db == tmp_path / "database" / "system.db"
    assert layout.user_db("ab12") == tmp_path / "database" / "users" / "ab12.db"
    assert layout.home("ab12") == tmp_path / "homes" / "ab12"
    assert layout.backups_dir == tmp_path / "backups"
    assert layout.cache_dir == tmp_path / "cache"


def test_layout_ensure_creates_private_dirs_whatever_the_umask(tmp_path: Path) -> None:
    root = tmp_path / "data"
    (root / "homes").mkdir(parents=True, mode=0o755)
    (root / "homes").chmod(0o755)  # an existing, too-open directory gets tightened
    old = os.umask(0)
    try:
        layout = DataLayout(root).ensure()
    finally:
        os.umask(old)
    for directory in (
        layout.root,
        layout.database_dir,
        layout.users_db_dir,
        layout.homes_dir,
        layout.backups_dir,
    ):
        assert directory.is_dir()
        assert mode(directory) == 0o700, directory


def test_secure_file(tmp_path: Path) -> None:
    path = tmp_path / "system.db"
    path.write_bytes(b"")
    path.chmod(0o666)
    secure_file(path)
    assert mode(path) == 0o600
    secure_file(tmp_path / "missing")  # no error for a file not yet created


@pytest.mark.parametrize(
    "user_id", ["../x", "", "a/b", "UPPER", "a.db", "x" * 65, "ab\n", "..", "a\x00b"]
)
def test_layout_refuses_unsafe_user_ids(tmp_path: Path, user_id: str) -> None:
    layout = DataLayout(tmp_path)
    with pytest.raises(ValueError):
        layout.user_db(user_id)
    with pytest.raises(ValueError):
        layout.home(user_id)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            '[log]\nlevel = "debug"\nstorage.busy_timeout_ms = 0\n',
            "line 3: unknown key log.storage",
        ),
        (
            '# Skald\n[server]\nhost = "0.0.0.0"\nport = "abc"\n',
            'line 4: server.port: expected an integer, got "abc"',
        ),
        ("\n\nserver.port = true\n", "line 3: server.port: expected an integer, got true"),
        ("[server]\nprot = 9100\n", "line 2: unknown key server.prot"),
        ("[server]\nport = 1\n\n[sever]\nport = 2\n", "line 4: unknown key sever"),
        ("log = 3\n", "line 1: log: expected a table, got 3"),
        ("# c\nsever.port = 2\n", "line 2: unknown key sever"),
        (
            '\nserver = { host = "h", port = "x" }\n',
            'line 2: server.port: expected an integer, got "x"',
        ),
    ],
    ids=[
        "dotted-key-inside-a-table-belongs-to-it",
        "wrong-type-names-file-line-and-key",
        "wrong-type-with-dotted-key",
        "unknown-key-is-named",
        "unknown-section-is-named",
        "section-that-is-not-a-table",
        "unknown-section-as-dotted-key",
        "inline-table-points-at-its-line",
    ],
)
def test_a_refused_file_is_named_with_the_line_and_the_key_at_fault(
    tmp_path: Path, text: str, said: str
) -> None:
    path, message = refusal(tmp_path, text)
    assert message == f"{path} {said}"
