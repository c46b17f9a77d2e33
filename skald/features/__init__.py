"""The built-in features, one package each (`skald/features/<name>/`: its hooks in `hooks.py`,
registered as a plugin through the same hooks a plugin uses, in the order of
`skald.plugins.manager.BUILTINS`; beside them the feature's routes, store, service and
tools). A feature does not import another feature's modules (an import contract)."""
