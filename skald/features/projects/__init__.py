"""Projects: a folder some members share, each with their own project conversation (#26)."""
