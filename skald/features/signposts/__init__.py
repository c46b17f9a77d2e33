"""Memory signposts: `~/user-memory` and `~/shared-memory` in the sandbox say notes are no files (#26)."""
