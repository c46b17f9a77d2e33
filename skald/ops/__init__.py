"""Operator tooling that works next to (or instead of) a running server: the instance
lock and local ops channel (`channel`), backups and restores (`backup`), what the ops
channel reports (`inspect`), and the `doctor`/`status` commands."""
