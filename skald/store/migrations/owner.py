"""Schema of an owner database `database/users/<id>.db` (encrypted unless the role says not).

The built-in features' own migrations of it, and the frozen history: which of them the
old `user_version` 1..5 were (see `skald.store.migrations`).
"""

from __future__ import annotations

from skald.store.migrations import Feature, Migration, SchemaPlan

_V1_KV = """
CREATE TABLE kv(
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL CHECK (json_valid(value)),
    updated_at TEXT NOT NULL
) WITHOUT ROWID;
"""

# Private memory notes, searched with FTS5. The index is external-content so the text is
# stored once; triggers keep it in step with every insert, update and delete.
_V2_NOTES = """
CREATE TABLE memory_notes(
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL UNIQUE,
    content TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE VIRTUAL TABLE memory_notes_fts USING fts5(
    path, content, content='memory_notes', content_rowid='id',
    tokenize='unicode61 remove_diacritics 2'
);
CREATE TRIGGER memory_notes_ai AFTER INSERT ON memory_notes BEGIN
    INSERT INTO memory_notes_fts(rowid, path, content) VALUES (new.id, new.path, new.content);
END;
CREATE TRIGGER memory_notes_ad AFTER DELETE ON memory_notes BEGIN
    INSERT INTO memory_notes_fts(memory_notes_fts, rowid, path, content)
        VALUES ('delete', old.id, old.path, old.content);
END;
CREATE TRIGGER memory_notes_au AFTER UPDATE ON memory_notes BEGIN
    INSERT INTO memory_notes_fts(memory_notes_fts, rowid, path, content)
        VALUES ('delete', old.id, old.path, old.content);
    INSERT INTO memory_notes_fts(rowid, path, content) VALUES (new.id, new.path, new.content);
END;
"""

# Conversations (chat tabs) and their history, written call by call so a crash mid-turn
# loses nothing. `body` is a provider-neutral `skald.llm.types.Message` as JSON.
_V3_CHAT = """
CREATE TABLE conversations(
    id TEXT PRIMARY KEY,
    title TEXT NOT NULL DEFAULT '',
    agent_id TEXT NOT NULL,
    model_id TEXT,
    open INTEGER NOT NULL DEFAULT 1 CHECK (open IN (0, 1)),
    status TEXT NOT NULL DEFAULT 'idle' CHECK (status IN ('idle', 'running', 'awaiting_approval')),
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    cost_usd REAL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE chat_messages(
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
    body TEXT NOT NULL CHECK (json_valid(body)),
    attachments TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(attachments)),
    summary INTEGER NOT NULL DEFAULT 0 CHECK (summary IN (0, 1)),
    hidden INTEGER NOT NULL DEFAULT 0 CHECK (hidden IN (0, 1)),
    created_at TEXT NOT NULL
);
CREATE INDEX chat_messages_by_conversation ON chat_messages(conversation_id, seq);
CREATE TABLE chat_calls(
    id TEXT PRIMARY KEY,
    conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    message_seq INTEGER NOT NULL,
    ord INTEGER NOT NULL,
    name TEXT NOT NULL,
    arguments TEXT NOT NULL CHECK (json_valid(arguments)),
    state TEXT NOT NULL,
    metadata TEXT,
    updated_at TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX chat_calls_by_conversation ON chat_calls(conversation_id, state);
"""

# The security group a conversation runs under; NULL: the member's role default. The
# group is checked against the role on every use, so a stale one falls back to the default.
_V4_SECURITY_GROUP = """
ALTER TABLE conversations ADD COLUMN security_group TEXT;
"""

# The Inbox: approval requests (and later questions) waiting for the member, kept so a
# restart loses none; `id` is the tool call's id. And the tools a conversation lets run
# without asking ("approve for this conversation").
_V5_INBOX = """
CREATE TABLE inbox_items(
    id TEXT PRIMARY KEY,
    conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    kind TEXT NOT NULL CHECK (kind IN ('approval', 'question')),
    tool TEXT NOT NULL,
    arguments TEXT NOT NULL CHECK (json_valid(arguments)),
    preview TEXT,
    reason TEXT NOT NULL DEFAULT '',
    choices TEXT CHECK (choices IS NULL OR json_valid(choices)),
    status TEXT NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'approved', 'rejected', 'answered', 'settled')),
    created_at TEXT NOT NULL,
    decided_at TEXT
) WITHOUT ROWID;
CREATE INDEX inbox_items_pending ON inbox_items(status, created_at);
CREATE TABLE conversation_bypass(
    conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    tool TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY(conversation_id, tool)
) WITHOUT ROWID;
"""

SETTINGS = Feature("settings", (Migration(1, "key/value", _V1_KV),))
MEMORY = Feature("memory", (Migration(1, "memory notes with full-text search", _V2_NOTES),))
# Search over what was said: the shown text of user and assistant messages (never the
# view context nor the attachment notes), one row per message, kept by triggers. Parts
# are {"type": "text", "text": ...}; a harness block or an attachment note is left out.
_CHAT_SEARCH = """
CREATE VIRTUAL TABLE chat_messages_fts USING fts5(
    text, conversation_id UNINDEXED, tokenize='unicode61 remove_diacritics 2'
);
INSERT INTO chat_messages_fts(rowid, text, conversation_id)
    SELECT seq, (SELECT coalesce(group_concat(json_extract(p.value, '$.text'), ' '), '')
                 FROM json_each(chat_messages.body, '$.content') AS p
                 WHERE json_extract(p.value, '$.type') = 'text'
                   AND json_extract(p.value, '$.text') NOT LIKE '<skald-context>%'
                   AND json_extract(p.value, '$.text') NOT LIKE '[attached: %'),
           conversation_id
    FROM chat_messages WHERE role IN ('user', 'assistant') AND summary = 0;
CREATE TRIGGER chat_messages_fts_ai AFTER INSERT ON chat_messages
    WHEN new.role IN ('user', 'assistant') AND new.summary = 0 BEGIN
    INSERT INTO chat_messages_fts(rowid, text, conversation_id) VALUES (
        new.seq,
        (SELECT coalesce(group_concat(json_extract(p.value, '$.text'), ' '), '')
         FROM json_each(new.body, '$.content') AS p
         WHERE json_extract(p.value, '$.type') = 'text'
           AND json_extract(p.value, '$.text') NOT LIKE '<skald-context>%'
           AND json_extract(p.value, '$.text') NOT LIKE '[attached: %'),
        new.conversation_id);
END;
CREATE TRIGGER chat_messages_fts_ad AFTER DELETE ON chat_messages BEGIN
    DELETE FROM chat_messages_fts WHERE rowid = old.seq;
END;
"""

# "Answer again" keeps the answers it replaces: their text, under the member's message
# they answered (`seq`; NULL between the rewind and the message sent again).
_CHAT_EARLIER_ANSWERS = """
CREATE TABLE chat_earlier_answers(
    id INTEGER PRIMARY KEY,
    conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    seq INTEGER,
    text TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX chat_earlier_answers_by_message ON chat_earlier_answers(conversation_id, seq, id);
"""

CHAT = Feature(
    "chat",
    (
        Migration(1, "conversations and chat history", _V3_CHAT),
        Migration(2, "full-text search of chat messages", _CHAT_SEARCH),
        Migration(3, "earlier answers kept by Answer again", _CHAT_EARLIER_ANSWERS),
    ),
)
CONVERSATION_GROUPS = Feature(
    "approvals", (Migration(1, "conversation security group", _V4_SECURITY_GROUP),), after=("chat",)
)
# A helper's (sub-agent's) request: its conversation is the stored one it works for, and
# `parent_call` the call in that conversation that started the helper (the helper's own
# call lives only in memory, so the row stays open while that parent call is open).
_INBOX_PARENT_CALL = """
ALTER TABLE inbox_items ADD COLUMN parent_call TEXT;
"""

# A request of background work (a scheduled job's run, a background task): what it comes
# from ('scheduled' | 'task' and its title, shown as the item's label) and until when it
# waits before it expires (ISO UTC); NULL for a chat's own requests.
_INBOX_ORIGIN = """
ALTER TABLE inbox_items ADD COLUMN origin TEXT CHECK (origin IS NULL OR origin IN ('scheduled', 'task'));
ALTER TABLE inbox_items ADD COLUMN origin_title TEXT;
ALTER TABLE inbox_items ADD COLUMN expires_at TEXT;
"""

INBOX = Feature(
    "inbox",
    (
        Migration(1, "inbox items and per-conversation bypasses", _V5_INBOX),
        Migration(2, "inbox items of helpers", _INBOX_PARENT_CALL),
        Migration(3, "inbox items of background work: origin and expiry", _INBOX_ORIGIN),
    ),
    after=("chat",),
)

# Frozen: the old user_version N means the first N of these ran. Never change it.
OWNER = SchemaPlan(
    "owner",
    history=(SETTINGS[1], MEMORY[1], CHAT[1], CONVERSATION_GROUPS[1], INBOX[1]),
)
