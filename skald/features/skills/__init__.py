"""Skills: folders with a SKILL.md the assistant follows, household-wide or a member's (#26)."""
