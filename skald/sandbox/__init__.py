"""Per-member sandbox containers (DESIGN.md C4): the runtime image, the container
manager, command execution and the command probe. Every Docker SDK call blocks, so the
async side runs them in threads."""
