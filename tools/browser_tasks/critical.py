"""Which browser actions are critical: decided by the runtime from the element, whatever the model says.

An action is critical when it clicks a form's submit control, or a button or link whose
accessible name reads as buying, ordering, paying, booking, reserving, sending, deleting,
subscribing, signing in or sharing personal data; or when it types into (or selects in)
a password or payment field. A critical action is never performed without the owner's
reply to a critical point that held exactly that action.

The word lists are English; a name in another language is judged by its form role alone
(a submit control is critical in any language).
"""

from __future__ import annotations

import re
from typing import Any

# Whole words (or phrases) of an accessible name that make a click critical, by what they mean.
_CLICK_WORDS: dict[str, tuple[str, ...]] = {
    "buying": ("buy", "purchase", "checkout", "check out", "add funds", "top up"),
    "ordering": ("order", "place order", "submit order"),
    "paying": ("pay", "payment", "pay now", "transfer", "donate", "tip"),
    "booking": ("book", "booking", "book now"),
    "reserving": ("reserve", "reservation", "rsvp"),
    "sending": ("send", "submit", "post", "publish", "reply", "email", "e-mail", "message", "contact us"),
    "deleting": ("delete", "remove", "erase", "discard", "close account", "deactivate", "cancel subscription"),
    "subscribing": ("subscribe", "unsubscribe", "sign up", "signup", "register", "join", "enroll", "start trial"),
    "signing in": ("sign in", "signin", "log in", "login", "log on", "authenticate", "continue with"),
    "sharing personal data": ("share", "allow", "accept", "agree", "grant", "give access", "connect", "confirm"),
}
_CLICK_PATTERN = {
    meaning: re.compile(r"\b(?:" + "|".join(re.escape(w).replace(r"\ ", r"[\s_-]*") for w in words) + r")\b")
    for meaning, words in _CLICK_WORDS.items()
}
_PAYMENT_AUTOCOMPLETE = re.compile(r"\bcc-[a-z-]+\b")
_SECRET_AUTOCOMPLETE = ("current-password", "new-password", "one-time-code")
_PAYMENT_FIELD = re.compile(
    r"card[\s_-]*(?:number|no|num)|\bcc[\s_-]*(?:num|number|no)\b|\bcvv\d?\b|\bcvc\d?\b|\bcsc\b|security[\s_-]*code"
    r"|expir(?:y|ation)|\biban\b|account[\s_-]*number|routing[\s_-]*number|\bpin\b|sort[\s_-]*code|password|passcode"
)
TYPING = ("type", "select")


def click_meaning(name: str) -> str | None:
    """Return what a button's or link's name reads as (buying, sending, ...), or None."""
    lowered = " ".join(name.lower().split())
    for meaning, pattern in _CLICK_PATTERN.items():
        if pattern.search(lowered):
            return meaning
    return None


def is_secret_field(element: dict[str, Any]) -> bool:
    """Whether an element is a password or payment field."""
    if element.get("type") == "password":
        return True
    autocomplete = str(element.get("autocomplete", ""))
    if _PAYMENT_AUTOCOMPLETE.search(autocomplete) or any(a in autocomplete for a in _SECRET_AUTOCOMPLETE):
        return True
    described = " ".join(str(element.get(key, "")) for key in ("name", "field")).lower()
    return bool(_PAYMENT_FIELD.search(described))


def critical_point_of(action: str, element: dict[str, Any]) -> str | None:
    """Return why an action on an element is critical (safe words for the owner), or None."""
    if action == "click":
        if element.get("submit"):
            return "submits a form"
        if element.get("role") in ("button", "link", "menuitem", "tab", "option", "checkbox", "switch", "radio"):
            meaning = click_meaning(str(element.get("name", "")))
            if meaning is not None:
                return f"reads as {meaning}"
        return None
    if action in TYPING and is_secret_field(element):
        return "fills a password or payment field"
    return None
