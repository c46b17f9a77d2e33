"""The privacy self-check: what protects a member's data, verified at view time (issue 30)."""
