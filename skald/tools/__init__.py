"""What the tools share below the files layer: the memory notes' side of the file tools
(`skald.tools.memory`), argument checks (`args`) and previews (`preview`). The tool
family itself is `skald.files.tools`."""

from skald.tools.memory import MemorySearchTool, NoteStores

__all__ = ["MemorySearchTool", "NoteStores"]
