"""Hooks: how features plug into Skald, built-in ones and plugins alike (pluggy).

Every built-in feature (files, memory, sandbox, ask, helpers, models, approvals, inbox,
ops, accounts, chat) registers its tools, routes, mounts, prompt blocks, migrations and
configuration through the same hooks a plugin uses; nothing central keeps a list of
them. The hooks are declared in `skald.plugins.specs`, collected by
`skald.plugins.manager.Plugins`, and documented in `docs/dev/plugins.md`.

A plugin is a module (or object) with functions marked `@hookimpl`, named like the
hooks, taking any subset of the hook's arguments. It is loaded from the `skald` entry
point group of installed packages, or named in `[plugins] modules` of config.toml.

Trap: pluggy calls implementations last-registered first; collections that need an
order (mounts: the home first; migrations: `after`) sort for themselves, never rely on it.
"""

from __future__ import annotations

import pluggy

PROJECT = "skald"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

__all__ = ["PROJECT", "hookimpl", "hookspec"]
