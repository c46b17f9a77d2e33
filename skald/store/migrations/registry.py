"""Schema of the registry database `database/system.db` (instance-wide, unencrypted).

The built-in features' own migrations of it, and the frozen history: which of them the
old `user_version` 1..7 were (see `skald.store.migrations`).
"""

from __future__ import annotations

import json

import apsw

from skald.store.migrations import Feature, Migration, SchemaPlan

# Capabilities a role can hold. Later migrations add more; none is ever renamed.
CAPABILITIES_V1 = {
    "chat": "Talk to the assistant",
    "inbox": "See and answer approval requests and questions",
    "files": "Browse and manage own files",
    "memory.shared": "Read the household's shared memory",
    "sandbox.exec": "Let the assistant run commands in the member's sandbox",
    "connectors.use": "Use connectors (MCP servers)",
    "schedule.use": "Schedule jobs and background tasks",
    "projects.use": "Create and join projects",
    "telegram.use": "Chat through Telegram",
    "admin.users": "Manage accounts",
    "admin.roles": "Manage roles and their capabilities",
    "admin.models": "Manage LLM providers and models",
    "admin.connectors": "Install connectors and plugins",
    "admin.system": "Instance settings, backups and diagnostics",
}

_MEMBER = [c for c in CAPABILITIES_V1 if not c.startswith("admin.")]

# name -> (display name, capabilities, attributes)
ROLES_V1: dict[str, tuple[str, list[str], dict[str, object]]] = {
    "admin": (
        "Administrator",
        list(CAPABILITIES_V1),
        {
            "ui_mode": "full",
            "encrypted": True,
            "auto_grant": True,
            "sandbox_network": "bridge",
            "default_security_group": "default",
            "allowed_security_groups": ["default"],
            "default_chat_agent": "assistant",
        },
    ),
    "member": (
        "Member",
        _MEMBER,
        {
            "ui_mode": "full",
            "encrypted": True,
            "auto_grant": True,
            "sandbox_network": "bridge",
            "default_security_group": "default",
            "allowed_security_groups": ["default"],
            "default_chat_agent": "assistant",
        },
    ),
    "children": (
        "Children",
        ["chat", "inbox"],
        {
            # Unencrypted so supervisors can read and so their agents run after a reboot.
            "ui_mode": "simple",
            "encrypted": False,
            "auto_grant": False,
            "sandbox_network": "none",
            "default_security_group": "default",
            "allowed_security_groups": ["default"],
            "default_chat_agent": "kid",
        },
    ),
}

_V1_TABLES = """
CREATE TABLE capabilities(
    name TEXT PRIMARY KEY,
    description TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE roles(
    name TEXT PRIMARY KEY CHECK (name GLOB '[a-z]*' AND length(name) <= 32),
    display_name TEXT NOT NULL,
    builtin INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ','now'))
) WITHOUT ROWID;
CREATE TABLE role_capabilities(
    role TEXT NOT NULL REFERENCES roles(name) ON DELETE CASCADE ON UPDATE CASCADE,
    capability TEXT NOT NULL REFERENCES capabilities(name) ON DELETE CASCADE,
    PRIMARY KEY(role, capability)
) WITHOUT ROWID;
CREATE TABLE role_attributes(
    role TEXT NOT NULL REFERENCES roles(name) ON DELETE CASCADE ON UPDATE CASCADE,
    key TEXT NOT NULL,
    value TEXT NOT NULL CHECK (json_valid(value)),
    PRIMARY KEY(role, key)
) WITHOUT ROWID;
CREATE TABLE config(
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL CHECK (json_valid(value))
) WITHOUT ROWID;
"""


def _v1_roles(conn: apsw.Connection) -> None:
    conn.execute(_V1_TABLES)
    conn.executemany("INSERT INTO capabilities VALUES (?, ?)", list(CAPABILITIES_V1.items()))
    for name, (display, caps, attrs) in ROLES_V1.items():
        conn.execute(
            "INSERT INTO roles(name, display_name, builtin) VALUES (?, ?, 1)", (name, display)
        )
        conn.executemany("INSERT INTO role_capabilities VALUES (?, ?)", [(name, c) for c in caps])
        conn.executemany(
            "INSERT INTO role_attributes VALUES (?, ?, ?)",
            [(name, k, json.dumps(v)) for k, v in attrs.items()],
        )


_V2_USERS = """
CREATE TABLE users(
    id TEXT PRIMARY KEY CHECK (id GLOB '[a-z0-9]*' AND length(id) BETWEEN 1 AND 64),
    username TEXT NOT NULL UNIQUE COLLATE NOCASE,
    display_name TEXT NOT NULL,
    role TEXT NOT NULL REFERENCES roles(name) ON UPDATE CASCADE,
    encrypted INTEGER NOT NULL CHECK (encrypted IN (0, 1)),
    password_hash TEXT,
    active INTEGER NOT NULL DEFAULT 1 CHECK (active IN (0, 1)),
    locale TEXT NOT NULL DEFAULT 'en',
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    -- Encrypted accounts keep no password hash: unwrapping the key is the check.
    CHECK ((encrypted = 1) = (password_hash IS NULL))
);
CREATE TABLE key_wraps(
    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    kind TEXT NOT NULL CHECK (kind IN ('password', 'recovery')),
    wrap TEXT NOT NULL CHECK (json_valid(wrap)),
    created_at TEXT NOT NULL,
    PRIMARY KEY(user_id, kind)
) WITHOUT ROWID;
"""

# Free-form profile fields (pronouns, birthday, interests...) for the assistant's prompt.
_V3_PROFILE = """
ALTER TABLE users ADD COLUMN profile TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(profile));
"""

# Login sessions. Only a hash of the token is stored: a copied registry grants no logins.
_V4_SESSIONS = """
CREATE TABLE sessions(
    token_hash TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    created_at REAL NOT NULL,
    last_seen_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    user_agent TEXT NOT NULL DEFAULT '',
    client TEXT NOT NULL DEFAULT ''
) WITHOUT ROWID;
CREATE INDEX sessions_by_user ON sessions(user_id);
"""

# The household's shared memory notes: the owner's `memory_notes` shape (external-content
# FTS5 kept in step by triggers) plus who changed each note last. Deleting that member
# keeps the note and forgets the name.
_V5_SHARED_NOTES = """
CREATE TABLE shared_memory_notes(
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL UNIQUE,
    content TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    updated_by TEXT REFERENCES users(id) ON DELETE SET NULL
);
CREATE VIRTUAL TABLE shared_memory_notes_fts USING fts5(
    path, content, content='shared_memory_notes', content_rowid='id',
    tokenize='unicode61 remove_diacritics 2'
);
CREATE TRIGGER shared_memory_notes_ai AFTER INSERT ON shared_memory_notes BEGIN
    INSERT INTO shared_memory_notes_fts(rowid, path, content)
        VALUES (new.id, new.path, new.content);
END;
CREATE TRIGGER shared_memory_notes_ad AFTER DELETE ON shared_memory_notes BEGIN
    INSERT INTO shared_memory_notes_fts(shared_memory_notes_fts, rowid, path, content)
        VALUES ('delete', old.id, old.path, old.content);
END;
CREATE TRIGGER shared_memory_notes_au AFTER UPDATE OF path, content ON shared_memory_notes BEGIN
    INSERT INTO shared_memory_notes_fts(shared_memory_notes_fts, rowid, path, content)
        VALUES ('delete', old.id, old.path, old.content);
    INSERT INTO shared_memory_notes_fts(rowid, path, content)
        VALUES (new.id, new.path, new.content);
END;
"""

# LLM providers (API keys sealed with the instance key) and models.
_V6_LLM = """
CREATE TABLE llm_providers(
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE COLLATE NOCASE,
    kind TEXT NOT NULL,
    base_url TEXT,
    api_key_sealed TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE llm_models(
    id TEXT PRIMARY KEY,
    provider_id TEXT NOT NULL REFERENCES llm_providers(id) ON DELETE CASCADE,
    model TEXT NOT NULL,
    name TEXT NOT NULL UNIQUE COLLATE NOCASE,
    strength TEXT NOT NULL CHECK (strength IN ('low', 'average', 'high')),
    capabilities TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(capabilities)),
    priority INTEGER NOT NULL DEFAULT 100,
    enabled INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX llm_models_order ON llm_models(priority, name);
-- What was asked of which model and how it went: counts and timings, never content.
CREATE TABLE llm_requests(
    id INTEGER PRIMARY KEY,
    at REAL NOT NULL,
    user_id TEXT NOT NULL,
    model_id TEXT NOT NULL,
    status TEXT NOT NULL,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    latency_ms REAL NOT NULL DEFAULT 0,
    error TEXT
);
"""

# Approval rules and the security groups they belong to. Seeded rows carry a seed key;
# `approval_seeded` remembers every key ever seeded, so a deleted default stays deleted.
_V7_APPROVALS = """
CREATE TABLE security_groups(
    name TEXT PRIMARY KEY CHECK (name GLOB '[a-z]*' AND length(name) <= 32),
    display_name TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT ''
) WITHOUT ROWID;
CREATE TABLE approval_rules(
    id INTEGER PRIMARY KEY,
    grp TEXT NOT NULL REFERENCES security_groups(name) ON DELETE CASCADE ON UPDATE CASCADE,
    tool_pattern TEXT NOT NULL,
    path_pattern TEXT,
    action TEXT NOT NULL CHECK (action IN ('allow', 'require', 'deny')),
    priority INTEGER NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    seed_key TEXT UNIQUE
);
CREATE INDEX approval_rules_order ON approval_rules(grp, priority, id);
CREATE TABLE approval_seeded(
    seed_key TEXT PRIMARY KEY
) WITHOUT ROWID;
"""


# Turn budgets of the built-in roles (the attributes are new; other roles keep none,
# which means the instance default). A runaway turn of a weak model was seen spending
# 99k tokens on 19 rounds of one cut-off call: children get a tighter budget.
TURN_BUDGETS_V5: dict[str, dict[str, int]] = {
    "admin": {"turn_max_tokens": 1_000_000},
    "member": {"turn_max_tokens": 1_000_000},
    "children": {"turn_max_rounds": 10, "turn_max_tokens": 200_000},
}


def _v5_turn_budgets(conn: apsw.Connection) -> None:
    for role, attrs in TURN_BUDGETS_V5.items():
        # INSERT OR IGNORE: a role renamed or deleted by the household is left alone.
        conn.executemany(
            "INSERT OR IGNORE INTO role_attributes(role, key, value) "
            "SELECT name, ?, ? FROM roles WHERE name = ? AND builtin = 1",
            [(key, json.dumps(value), role) for key, value in attrs.items()],
        )


ACCOUNTS = Feature(
    "accounts",
    (
        Migration(1, "roles, capabilities, config", _v1_roles),
        Migration(2, "users and key wraps", _V2_USERS),
        Migration(3, "user profile", _V3_PROFILE),
        Migration(4, "login sessions", _V4_SESSIONS),
        Migration(5, "turn budgets of the built-in roles", _v5_turn_budgets),
    ),
)
SHARED_MEMORY = Feature(
    "memory",
    (Migration(1, "shared memory notes with full-text search", _V5_SHARED_NOTES),),
    after=("accounts",),
)
# Every request gets its row, stopped ones too: the outcome says how it ended, and
# `estimated` marks token counts Skald estimated because the server reported none.
_MODELS_V2_OUTCOMES = """
ALTER TABLE llm_requests ADD COLUMN estimated INTEGER NOT NULL DEFAULT 0
    CHECK (estimated IN (0, 1));
UPDATE llm_requests SET status = CASE status WHEN 'ok' THEN 'finished'
    WHEN 'error' THEN 'failed' ELSE status END;
"""

# Seconds a provider may stay silent before a request fails; NULL: its kind's default.
_MODELS_V3_SILENCE = """
ALTER TABLE llm_providers ADD COLUMN silence_timeout_s INTEGER
    CHECK (silence_timeout_s IS NULL OR silence_timeout_s BETWEEN 1 AND 3600);
"""

# What a model can take and give: its longest answer (tokens), and its context window
# (prompt + answer, tokens). NULL: unknown (Skald's defaults apply).
_MODELS_V4_LIMITS = """
ALTER TABLE llm_models ADD COLUMN max_output_tokens INTEGER
    CHECK (max_output_tokens IS NULL OR max_output_tokens > 0);
ALTER TABLE llm_models ADD COLUMN context_window INTEGER
    CHECK (context_window IS NULL OR context_window > 0);
"""

# What a model is for: chat (the default, and every model before), transcription
# (speech to text), speech (text to speech) or image (pictures from a prompt). Each
# kind has its own priority order and fallback; AUTO never mixes kinds.
_MODELS_V5_KINDS = """
ALTER TABLE llm_models ADD COLUMN kind TEXT NOT NULL DEFAULT 'chat'
    CHECK (kind IN ('chat', 'transcription', 'speech', 'image'));
"""

# How much a chat model is given per turn: 'auto' (the compact profile when its context
# window is small), 'full' (the whole prompt, every tool) or 'compact'.
_MODELS_V6_PROFILE = """
ALTER TABLE llm_models ADD COLUMN prompt_profile TEXT NOT NULL DEFAULT 'auto'
    CHECK (prompt_profile IN ('auto', 'full', 'compact'));
"""

# What a request cost (as the provider reported it; NULL: not reported, a local model)
# and where it came from (the conversation of a turn, a job's, a task's), for the
# request log (issue 30). Counts and ids only, never content.
_MODELS_V7_COST_ORIGIN = """
ALTER TABLE llm_requests ADD COLUMN cost_usd REAL;
ALTER TABLE llm_requests ADD COLUMN origin TEXT;
"""

MODELS = Feature(
    "models",
    (
        Migration(1, "LLM providers, models and request metadata", _V6_LLM),
        Migration(2, "request outcomes and estimated token counts", _MODELS_V2_OUTCOMES),
        Migration(3, "a provider's own silence timeout", _MODELS_V3_SILENCE),
        Migration(4, "per-model output and context limits", _MODELS_V4_LIMITS),
        Migration(5, "model kinds: chat, transcription, speech, image", _MODELS_V5_KINDS),
        Migration(6, "per-model prompt profile: auto, full, compact", _MODELS_V6_PROFILE),
        Migration(7, "request cost and origin", _MODELS_V7_COST_ORIGIN),
    ),
)
APPROVALS = Feature(
    "approvals", (Migration(1, "approval rules and security groups", _V7_APPROVALS),)
)

# Frozen: the old user_version N means the first N of these ran. Never change it.
REGISTRY = SchemaPlan(
    "registry",
    history=(
        ACCOUNTS[1],
        ACCOUNTS[2],
        ACCOUNTS[3],
        ACCOUNTS[4],
        SHARED_MEMORY[1],
        MODELS[1],
        APPROVALS[1],
    ),
)
