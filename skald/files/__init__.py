"""Members' files: the path router, safe file operations, and the model's file tools.

Rules and traps: `docs/dev/files.md`.
"""

from skald.files.router import (
    CONTAINER_HOME,
    DOCS_MOUNT,
    HOME_MOUNT,
    FileEntry,
    FileSystemError,
    NewFile,
    PathDeniedError,
    PathRouter,
    Place,
    ReadOnlyError,
    Resolved,
    Virtual,
)
from skald.files.tools import file_tools, workspace_tools

__all__ = [
    "CONTAINER_HOME",
    "DOCS_MOUNT",
    "HOME_MOUNT",
    "FileEntry",
    "FileSystemError",
    "NewFile",
    "PathDeniedError",
    "PathRouter",
    "Place",
    "ReadOnlyError",
    "Resolved",
    "Virtual",
    "file_tools",
    "workspace_tools",
]
