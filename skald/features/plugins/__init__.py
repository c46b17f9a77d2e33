"""Plugins an administrator installs, switches and configures (docs/plugins.md).

The wheels land in the data folder's `plugins/<id>/` (`install.py`); the loader, the
switches and the isolation of a broken plugin are the hook machinery's
(`skald/plugins/manager.py`, `switches.py`); this package holds the Plugins page, its
routes and the catch-all that answers for a plugin switched off or failed.
"""
