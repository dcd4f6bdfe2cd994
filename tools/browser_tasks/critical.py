"""Which browser actions are critical by their names: the runtime's second signal, whatever the model says.

The first signal is the network (`tools.browser_tasks.guard`): while a task acts, anything
it would send that changes state is held or refused. Names come first in time, because
some harm needs no state-changing request (a link whose GET buys, a `go_to` straight to a
purchase URL): such an action is held before it is performed.

An action is critical by name when it clicks a form's submit control, or a control whose
name or visible text reads as a commitment (buying, selling, paying, deleting, sending,
granting access, ...); when it types into (or selects in) a password or payment field;
or when `go_to` opens an address whose path or query reads as one. Names lie, so they are
read suspiciously: NFKC-normalised (fullwidth letters), confusable letters folded to Latin
(a Cyrillic "Ve" in what reads "Buy"), invisible characters dropped, and the visible text is judged
beside the accessible name (an `aria-label="Read more"` on a visible "Buy now" is still
buying). The word lists are English, German, French and Spanish; a name in another
language is judged by its form role and by the network.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any
from urllib.parse import unquote, urlsplit

# Whole words (or phrases) that make an action critical, by what they mean.
_WORDS: dict[str, tuple[str, ...]] = {
    "buying": (
        "buy", "purchase", "checkout", "check out", "add funds", "top up", "kaufen", "jetzt kaufen", "kasse",
        "zur kasse", "acheter", "achat", "commander", "comprar", "compra", "pagar ahora",
    ),
    "selling": ("sell", "sell all", "verkaufen", "vendre", "vender"),
    "bidding": ("bid", "place bid", "make offer", "bieten", "gebot", "enchérir", "pujar", "oferta"),
    "ordering": (
        "order", "place order", "submit order", "bestellen", "zahlungspflichtig bestellen", "bestellung",
        "pedido", "realizar pedido", "passer la commande",
    ),
    "paying": (
        "pay", "payment", "pay now", "transfer", "wire", "send money", "withdraw", "withdraw funds", "donate", "tip",
        "bezahlen", "zahlen", "überweisen", "abheben", "spenden", "payer", "paiement", "virement", "retirer",
        "transferir", "retirar", "donar",
    ),
    "booking": ("book", "booking", "book now", "buchen", "jetzt buchen", "réserver", "reservar"),
    "reserving": ("reserve", "reservation", "rsvp", "reservieren", "réservation", "reserva"),
    "confirming": (
        "confirm", "complete", "proceed", "yes proceed", "finalize", "finalise", "execute", "authorize",
        "authorise", "approve", "bestätigen", "abschließen", "fortfahren", "ausführen", "confirmer", "valider",
        "terminer", "confirmar", "completar", "proceder",
    ),
    "sending": (
        "send", "submit", "post", "publish", "reply", "forward", "email", "e-mail", "message", "contact us",
        "senden", "absenden", "abschicken", "veröffentlichen", "antworten", "weiterleiten", "envoyer", "publier",
        "répondre", "transférer", "enviar", "publicar", "responder", "reenviar",
    ),
    "deleting": (
        "delete", "remove", "erase", "discard", "trash", "move to trash", "empty trash", "wipe", "destroy", "purge",
        "close account", "deactivate", "cancel subscription", "löschen", "entfernen", "papierkorb", "leeren",
        "supprimer", "effacer", "corbeille", "vider", "eliminar", "borrar", "papelera", "vaciar",
    ),
    "subscribing": (
        "subscribe", "unsubscribe", "sign up", "signup", "register", "join", "enroll", "start trial", "abonnieren",
        "registrieren", "anmelden", "s'abonner", "abonner", "inscrire", "suscribir", "suscribirse", "registrarse",
    ),
    "signing in": (
        "sign in", "signin", "log in", "login", "log on", "authenticate", "continue with", "einloggen",
        "se connecter", "connexion", "iniciar sesión", "acceder",
    ),
    "changing the account": (
        "change password", "reset password", "change email", "change e-mail", "disable 2fa", "disable two-factor",
        "turn off two-factor", "remove 2fa", "make admin", "grant admin", "add admin", "transfer ownership",
        "passwort ändern", "changer le mot de passe", "cambiar contraseña",
    ),
    "deploying": ("deploy", "merge pull request", "run in production", "publish release", "déployer", "desplegar"),
    "sharing personal data": (
        "share", "allow", "accept", "agree", "grant", "give access", "connect", "teilen", "erlauben", "zulassen",
        "akzeptieren", "zustimmen", "partager", "autoriser", "accepter", "compartir", "permitir", "aceptar",
    ),
}  # fmt: skip


def _phrase(word: str) -> str:
    """A word or phrase whose parts may be joined by spaces, hyphens, underscores or slashes, or nothing."""
    return r"[\s_\-/]*".join(re.escape(part) for part in re.split(r"[\s-]+", word))


_PATTERN = {
    meaning: re.compile(r"(?<![\w])(?:" + "|".join(_phrase(w) for w in words) + r")(?![\w])")
    for meaning, words in _WORDS.items()
}

# Letters of other scripts that look like Latin ones (Unicode's confusables, the common subset).
# (Cyrillic, then Greek, written as code points: in the source they would look like Latin.)
_CYRILLIC = (
    "\u0410\u0412\u0421\u0415\u041d\u0406\u0408\u041a\u041c\u041e\u0420\u0405\u0422\u0425"
    "\u0423\u0430\u0435\u0440\u0441\u0443\u0445\u0456\u0458\u0455\u0501\u04bb\u04cf"
)
_GREEK = (
    "\u0391\u0392\u0395\u0396\u0397\u0399\u039a\u039c\u039d\u039f\u03a1\u03a4\u03a5\u03a7"
    "\u03b1\u03bf\u03b9\u03c5\u03bd\u03ba\u03c4\u03c1"
)
_CONFUSABLES = str.maketrans(
    {
        **dict(zip(_CYRILLIC, "ABCEHIJKMOPSTXYaepcyxijsdhl", strict=True)),
        **dict(zip(_GREEK, "ABEZHIKMNOPTYXaoiuvktp", strict=True)),
        "\u0131": "i",
        "\u0237": "j",
        "\u2113": "l",
        "\u00df": "ss",
    }
)
# Characters that change nothing a person sees: dropped before reading.
_INVISIBLE = re.compile(
    r"[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180e\u200b-\u200f\u202a-\u202e\u2060-\u206f\ufeff]"
)

_PAYMENT_AUTOCOMPLETE = re.compile(r"\bcc-[a-z-]+\b")
_SECRET_AUTOCOMPLETE = ("current-password", "new-password", "one-time-code")
_PAYMENT_FIELD = re.compile(
    r"card[\s_-]*(?:number|no|num)|\bcc[\s_-]*(?:num|number|no)\b|\bcvv\d?\b|\bcvc\d?\b|\bcsc\b|security[\s_-]*code"
    r"|expir(?:y|ation)|\biban\b|account[\s_-]*number|routing[\s_-]*number|\bpin\b|sort[\s_-]*code|password|passcode"
    r"|passwort|kennwort|kartennummer|mot[\s_-]*de[\s_-]*passe|contraseña|tarjeta|carte[\s_-]*bancaire"
)
TYPING = ("type", "select")
CLICKABLE_ROLES = ("button", "link", "menuitem", "tab", "option", "checkbox", "switch", "radio")


def name_folded(name: str) -> str:
    """A name as it reads: NFKC, confusables folded to Latin, invisible characters dropped, lowercase."""
    text = unicodedata.normalize("NFKC", name)
    text = _INVISIBLE.sub("", text).translate(_CONFUSABLES)
    return " ".join(text.casefold().split())


def click_meaning(name: str) -> str | None:
    """Return what a control's name reads as (buying, sending, ...), or None."""
    folded = name_folded(name)
    for meaning, pattern in _PATTERN.items():
        if pattern.search(folded):
            return meaning
    return None


def _element_meaning(element: dict[str, Any]) -> str | None:
    # The visible text is what the owner would read; an accessible name that says
    # something else ("Read more" over "Buy now") must not hide it. Both are judged.
    for shown in (element.get("name", ""), element.get("label", "")):
        meaning = click_meaning(str(shown))
        if meaning is not None:
            return meaning
    return None


def is_secret_field(element: dict[str, Any]) -> bool:
    """Whether an element is a password or payment field."""
    if element.get("type") == "password":
        return True
    autocomplete = str(element.get("autocomplete", ""))
    if _PAYMENT_AUTOCOMPLETE.search(autocomplete) or any(a in autocomplete for a in _SECRET_AUTOCOMPLETE):
        return True
    described = name_folded(" ".join(str(element.get(key, "")) for key in ("name", "label", "field")))
    return bool(_PAYMENT_FIELD.search(described))


def address_meaning(url: str) -> str | None:
    """What an address reads as by its path and query (`/checkout/confirm`, `?action=delete`), or None."""
    parts = urlsplit(url)
    words = re.sub(r"[/?&=+._,;:%-]+", " ", unquote(f"{parts.path} {parts.query}"))
    return click_meaning(words)


def critical_point_of(action: str, element: dict[str, Any]) -> str | None:
    """Return why an action on an element is critical by name (safe words for the owner), or None."""
    if action == "click":
        if element.get("submit"):
            return "submits a form"
        if element.get("role") in CLICKABLE_ROLES or element.get("tag") in ("a", "button"):
            meaning = _element_meaning(element)
            if meaning is not None:
                return f"reads as {meaning}"
        return None
    if action in TYPING:
        if is_secret_field(element):
            return "fills a password or payment field"
        if action == "select":
            meaning = _element_meaning(element)
            return f"reads as {meaning}" if meaning is not None else None
    return None


def go_to_critical(url: str) -> str | None:
    """Why opening this address is critical by its words (a purchase or deletion URL), or None."""
    meaning = address_meaning(url)
    return f"opens an address that reads as {meaning}" if meaning is not None else None
