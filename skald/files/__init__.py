"""Members' files: their mounts, the path router, safe file operations, the file tools.

Rules and traps: `docs/dev/files.md`. Nothing is imported here on purpose: low layers
(the approval rules, the sandbox) import `skald.files.mounts` alone, and re-exporting
the tools from here would pull the stores into their import.
"""
