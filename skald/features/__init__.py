"""The built-in features, each registered as a plugin through the same hooks a plugin
uses (`skald.plugins.manager.BUILTINS` lists them in order)."""
