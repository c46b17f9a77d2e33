"""The core: users, keys, roles and (later) per-user runtimes."""
