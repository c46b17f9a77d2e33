"""Errors in plain words: what a member reads when a turn fails.

Rule: a member sees a short sentence chosen by the failure's code (the web UI shows
its own translation of the same code, `chat.error.<code>` in web/i18n); the
technical text (provider, address, HTTP status, exception) goes to the log, the
request records and, in the chat, only to members who manage models (`admin.models`).
Trap: the technical text may name a provider or its address, which members must not
see (docs/models.md); never put it in the sentence.
"""

from __future__ import annotations

from typing import Final

PLAIN: Final[dict[str, str]] = {
    "unreachable": "The model service is not answering. Try again, or pick another model.",
    "timeout": "The model service took too long to answer. Try again, or pick another model.",
    "interrupted": "The model service stopped in the middle of the answer. Try again.",
    "overloaded": (
        "The model service is busy right now. Try again in a moment, or pick another model."
    ),
    "auth": "The model service refused Skald's key. An administrator needs to check it under Models.",
    "billing": (
        "The model service says the account has no credit left. An administrator needs to check it."
    ),
    "not_found": (
        "The model service does not know this model. "
        "An administrator needs to check it under Models."
    ),
    "context_overflow": (
        "This conversation has become too long for the model. "
        "Type /compact to shorten it, or start a new conversation."
    ),
    "bad_request": (
        "The model service refused the request. "
        "Try again; if it keeps happening, tell an administrator."
    ),
    "server_error": "The model service had a problem. Try again, or pick another model.",
    "no_model": "No language model is set up yet. An administrator can add one under Models.",
    "no_capable_model": (
        "No model here can handle this message (it has a picture). "
        "An administrator can mark a model that sees pictures under Models."
    ),
    "model_error": "The model service reported a problem. Try again, or pick another model.",
    "background_limit": (
        "Scheduled jobs and background tasks asked the assistant too often this minute, "
        "so this run stopped. The next run starts afresh."
    ),
    "cut_off": "The answer was too long for the model and was cut off.",
    "turn_budget": ("The assistant used up what one answer may use. Send a message to continue."),
    "repeated_failure": (
        "The assistant kept trying the same step, and it kept failing. "
        "Send a message to continue, perhaps with a hint."
    ),
    "quota_exceeded": "Your storage is full. Delete some files to continue.",
    "disk_full": "The server's disk is nearly full. Tell an administrator.",
    "internal": (
        "Something went wrong inside Skald. Try again; if it keeps happening, "
        "tell an administrator."
    ),
}


# Failures whose own message is already written for the member (a spending cap names
# the limit and when it resets): shown as they are, never replaced by the code's sentence.
OWN_WORDS: Final = frozenset({"limit_reached"})


def plain(code: str | None) -> str:
    """The member's sentence for a failure code (an unknown code reads as internal)."""
    return PLAIN.get(code or "internal", PLAIN["internal"])
