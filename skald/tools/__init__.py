"""The tools Skald hands to the agent loop (memory notes now; files, commands, MCP later)."""

from skald.tools.memory import (
    EditFileTool,
    ListFilesTool,
    MemorySearchTool,
    NoteTool,
    ReadFileTool,
    WriteFileTool,
    memory_indexes,
    memory_tools,
)

__all__ = [
    "EditFileTool",
    "ListFilesTool",
    "MemorySearchTool",
    "NoteTool",
    "ReadFileTool",
    "WriteFileTool",
    "memory_indexes",
    "memory_tools",
]
