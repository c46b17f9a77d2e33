"""The approval rule engine (pure policy, no I/O): used by the core's gate, the registry's seed and the admin API."""
