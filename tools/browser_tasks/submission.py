"""What an approval question shows of what a held action would submit: address, button, fields and values.

The owner decides on a held action by what it would send, so its question carries a summary
(`Submission`): the method and the address, the name of the button that submits, and the
fields with their values; for a request that is not a form's (a script's fetch, a beacon, a
WebSocket) the address and a short preview of its body. It is built from two sources: the
form of a submit button, read from the page before a click that is held by its name
(`form_submission`), and the body of a request the guard held (`request_submission`).

Everything here is page content: untrusted, and it may hold the owner's own secrets. This
module is the one place that bounds and masks it, before it is stored (the question is
kept in the task's record and sent to the owner's pages; never to a model, never logged):

- the address: scheme, host, port, path and query; never userinfo (`user:pass@`) or the
  fragment; a query value is shown unless it is masked like a field; cut at `ADDRESS_MAX`;
- a field is masked (its value shown as `MASK`) when its control is a password field
  (`type=password`), its `autocomplete` names a password, a one-time code or a card's
  number or security code, or its name or label reads as one (`SECRET_WORDS`: password,
  passcode, PIN, OTP, CVV/CVC, security code, card number, secret, token, API key, and
  the German, French and Spanish words for them; a name is read as words, so
  `cardNumber`, `card_cvv` and `user[password]` count); and, whatever its name, when its
  value is what a masked control of the page holds. Which is narrower than the fields
  whose typing is critical (`critical.is_secret_field`): an IBAN, an account number or an
  expiry date is shown, since the owner must see where money goes;
- a hidden field (`type=hidden`) is included and marked;
- a value is cut at `VALUE_MAX` characters (and marked), a name at `NAME_MAX`; at most
  `FIELDS_MAX` fields are listed, the rest counted;
- a body that is not fields: JSON with the values of secret-named keys masked at any
  depth; other text with `name=value` and `"name": "value"` pairs of secret names masked
  and the page's secret values replaced; cut at `BODY_MAX`.

Control characters (but newlines and tabs) and lone surrogates are dropped from every text.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, TypedDict
from urllib.parse import parse_qsl, unquote_plus, urlsplit

from tools.browser_tasks.critical import name_folded
from tools.browser_tasks.guard import SAFE_METHODS, WEBSOCKET

MASK = "••••"
VALUE_MAX = 200
NAME_MAX = 100
FIELDS_MAX = 30
ADDRESS_MAX = 1_000
BODY_MAX = 500
BUTTON_MAX = 120
SECRET_VALUE_MIN = 4  # a page's secret value shorter than this is masked only as a whole value, not inside text

# Words (after a name is split into words) that mark a field's value as the owner's secret.
SECRET_WORDS = re.compile(
    r"\w*(?:password|passwd|passcode|passphrase|passwort|kennwort|contraseña|token|secret|apikey)\w*"
    r"|\b(?:pass|pwd|pin|otp|totp|2 ?fa|one time code|security code|cvv|cvc|csc|cvn|card ?(?:number|no|num)"
    r"|cc ?(?:number|no|num)|credit ?card|api key|private ?key|geheimzahl|kartennummer|prüfnummer"
    r"|mot de passe|code secret|numéro de carte|clave|n[uú]mero de tarjeta)\b"
)
_SECRET_AUTOCOMPLETE = frozenset({"current-password", "new-password", "one-time-code", "cc-number", "cc-csc"})
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Za-z])(?=\d)|(?<=\d)(?=[A-Za-z])")
_NOT_WORD = re.compile(r"[\W_]+")
_UNSHOWN = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
# `name=value`, `name: value`, `"name": "value"` in a body that is neither fields nor JSON.
_PAIR = re.compile(
    r"""(?P<key>["']?(?P<name>[^\s"'=:&,;{}\[\]]{1,100})["']?\s*[=:]\s*)"""
    r"""(?P<value>"(?:[^"\\]|\\.)*"|'[^']*'|[^\s&,;"'}\]]+)"""
)
_BOUNDARY = re.compile(r'boundary="?([^";]+)"?', re.IGNORECASE)
_PART_NAME = re.compile(r'\bname="([^"\r\n]*)"', re.IGNORECASE)
_PART_FILE = re.compile(r'\bfilename="([^"\r\n]*)"', re.IGNORECASE)


class SubmittedField(TypedDict):
    name: str
    value: str  # MASK when masked; else at most VALUE_MAX characters
    hidden: bool  # an <input type=hidden>
    masked: bool
    cut: bool  # the value was longer than VALUE_MAX


class Submission(TypedDict):
    form: bool  # a form's submission (else a script's request, a beacon, a WebSocket)
    method: str
    address: str
    button: str | None  # the accessible name of the button that submits
    button_text: str | None  # its visible text, when that says something else
    fields: list[SubmittedField]
    fields_more: int  # fields past FIELDS_MAX, not listed
    body: str | None  # a preview of a body that is not fields
    body_cut: bool


@dataclass(frozen=True)
class Controls:
    """What the page's controls tell about a request's fields (held in memory only, never stored).

    `secret_values` are the values of the page's masked controls, so that a script that
    sends a password under another name (`{"p": ...}`) still has it masked.
    """

    secret_names: frozenset[str] = frozenset()
    hidden_names: frozenset[str] = frozenset()
    secret_values: frozenset[str] = frozenset()


NO_CONTROLS = Controls()


def shown_text(value: object) -> str:
    """Page text as it may be stored and shown: no control characters but newlines and tabs, no lone surrogates."""
    text = str(value if value is not None else "").replace("\r\n", "\n")
    text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace").replace("\ufffd", "")
    return _UNSHOWN.sub("", text)


def _words(text: str) -> str:
    return " ".join(_NOT_WORD.split(name_folded(_CAMEL.sub(" ", text)))).strip()


def secret_name(name: str) -> bool:
    """Whether a field's name (or label) reads as a password, a code or a card's secret."""
    return bool(name) and SECRET_WORDS.search(_words(name)) is not None


def secret_control(*, name: str, type: str = "", autocomplete: str = "", label: str = "") -> bool:
    """Whether a page's control holds a secret: a password field, a secret's autocomplete, or its name or label."""
    if type.strip().lower() == "password":
        return True
    if _SECRET_AUTOCOMPLETE.intersection(autocomplete.lower().split()):
        return True
    return secret_name(name) or secret_name(label)


def controls_from(raw: Any) -> Controls:
    """Controls from what `page.PAGE_CONTROLS` returned: `[{name, type, autocomplete, label, value}]`."""
    secret: set[str] = set()
    hidden: set[str] = set()
    values: set[str] = set()
    for item in raw if isinstance(raw, list) else []:
        if not isinstance(item, dict):
            continue
        name = shown_text(item.get("name"))[:NAME_MAX]
        kind = str(item.get("type") or "")
        if secret_control(
            name=name, type=kind, autocomplete=str(item.get("autocomplete") or ""), label=str(item.get("label") or "")
        ):
            if name:
                secret.add(name)
            value = shown_text(item.get("value"))
            if value:
                values.add(value)
        elif kind.lower() == "hidden" and name:
            hidden.add(name)
    return Controls(frozenset(secret), frozenset(hidden - secret), frozenset(values))


def field_shown(name: object, value: object, *, secret: bool, hidden: bool, controls: Controls) -> SubmittedField:
    """One field as the question shows it: masked, or its value cut at VALUE_MAX."""
    text = shown_text(value)
    shown_name = shown_text(name).replace("\n", " ")[:NAME_MAX]
    if secret or (text and text in controls.secret_values):
        return {"name": shown_name, "value": MASK, "hidden": hidden, "masked": True, "cut": False}
    return {
        "name": shown_name,
        "value": text[:VALUE_MAX],
        "hidden": hidden,
        "masked": False,
        "cut": len(text) > VALUE_MAX,
    }


def _secret_pair(name: str, value: str, controls: Controls) -> bool:
    return name in controls.secret_names or secret_name(name) or (bool(value) and value in controls.secret_values)


def address_shown(url: str, *, controls: Controls = NO_CONTROLS, query: bool = True) -> str:
    """An address as the question shows it: no userinfo, no fragment, secret query values masked, cut."""
    try:
        parts = urlsplit(shown_text(url).replace("\n", "").replace("\t", ""))
        port = parts.port
    except ValueError:
        return "(an address that could not be read)"
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    if parts.netloc:
        shown = f"{parts.scheme}://{host}{f':{port}' if port else ''}{parts.path}"
    else:
        shown = f"{parts.scheme}:{parts.path}" if parts.scheme else parts.path
    if query and parts.query:
        pairs = []
        for pair in parts.query.split("&"):
            name, equals, value = pair.partition("=")
            if equals and _secret_pair(unquote_plus(name), unquote_plus(value), controls):
                pair = f"{name}={MASK}"
            pairs.append(pair)
        shown += "?" + "&".join(pairs)
    return shown if len(shown) <= ADDRESS_MAX else shown[: ADDRESS_MAX - 1] + "…"


def _listed(fields: list[SubmittedField], total: int) -> tuple[list[SubmittedField], int]:
    """At most FIELDS_MAX fields, and how many of `total` are left out."""
    listed = fields[:FIELDS_MAX]
    return listed, max(total - len(listed), 0)


def _button(name: str | None, text: str | None) -> tuple[str | None, str | None]:
    name = shown_text(name or "").replace("\n", " ").strip()[:BUTTON_MAX] or None
    text = shown_text(text or "").replace("\n", " ").strip()[:BUTTON_MAX] or None
    if name is None:
        return text, None
    return name, text if text != name else None


def form_submission(raw: Any, *, button: str | None = None, button_text: str | None = None) -> Submission | None:
    """What a submit button's form would send, from `page.ELEMENT_FORM`'s reading; None when it sends nothing."""
    if not isinstance(raw, dict) or not isinstance(raw.get("fields"), list):
        return None
    method = str(raw.get("method") or "get").upper()
    if method not in ("GET", "POST"):
        return None  # a dialog's form closes its dialog and sends nothing
    entries = [entry for entry in raw["fields"] if isinstance(entry, dict)]
    secrets = [
        secret_control(
            name=str(entry.get("name") or ""),
            type=str(entry.get("type") or ""),
            autocomplete=str(entry.get("autocomplete") or ""),
            label=str(entry.get("label") or ""),
        )
        for entry in entries
    ]
    values = frozenset(shown_text(e.get("value")) for e, secret in zip(entries, secrets, strict=True) if secret)
    controls = Controls(secret_values=values - {""})
    fields = [
        field_shown(
            entry.get("name"),
            entry.get("value"),
            secret=secret,
            hidden=str(entry.get("type") or "").lower() == "hidden",
            controls=controls,
        )
        for entry, secret in zip(entries[:FIELDS_MAX], secrets, strict=False)
    ]
    total = raw["total"] if isinstance(raw.get("total"), int) else len(entries)
    listed, more = _listed(fields, total)
    name, text = _button(button, button_text)
    return {
        "form": True,
        "method": method,
        # A GET form's fields replace the query of its address: they are listed instead.
        "address": address_shown(str(raw.get("action") or ""), query=method != "GET"),
        "button": name,
        "button_text": text,
        "fields": listed,
        "fields_more": more,
        "body": None,
        "body_cut": False,
    }


def _multipart(body: str, content_type: str) -> list[tuple[str, str]]:
    """A multipart body's (name, value) pairs; a file's value is its name."""
    found = _BOUNDARY.search(content_type)
    if found is None:
        return []
    pairs = []
    for part in body.split(f"--{found.group(1)}")[1:]:
        if part.startswith("--"):
            break
        head, _, content = part.lstrip("\r\n").partition("\r\n\r\n")
        name = _PART_NAME.search(head)
        if name is None:
            continue
        file = _PART_FILE.search(head)
        pairs.append((name.group(1), file.group(1) if file else content.removesuffix("\r\n")))
    return pairs


def _masked_json(value: Any, controls: Controls) -> Any:
    if isinstance(value, dict):
        return {
            key: MASK if _secret_pair(str(key), "", controls) else _masked_json(item, controls)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_masked_json(item, controls) for item in value]
    if isinstance(value, str):
        # A secret inside a longer string (a GraphQL query, an encoded form) is masked too.
        return MASK if value in controls.secret_values else _masked_text(value, controls)
    if isinstance(value, int | float) and not isinstance(value, bool) and str(value) in controls.secret_values:
        return MASK  # a PIN sent as a number
    return value


def _masked_text(text: str, controls: Controls) -> str:
    def pair(match: re.Match[str]) -> str:
        raw = match.group("value").strip("\"'")
        if _secret_pair(unquote_plus(match.group("name")), unquote_plus(raw), controls):
            return match.group("key") + MASK
        return match.group(0)

    text = _PAIR.sub(pair, text)
    for secret in sorted(controls.secret_values, key=len, reverse=True):
        if len(secret) >= SECRET_VALUE_MIN:
            text = text.replace(secret, MASK)
    return text


def body_preview(body: str, controls: Controls = NO_CONTROLS) -> tuple[str, bool]:
    """A body that is not fields, masked and cut at BODY_MAX: (preview, cut)."""
    if "\x00" in body or "\ufffd" in body:
        return "(binary data)", False
    stripped = body.strip()
    try:
        parsed = json.loads(stripped) if stripped[:1] in ("{", "[") else None
    except ValueError:
        parsed = None
    if isinstance(parsed, dict | list):
        text = json.dumps(_masked_json(parsed, controls), ensure_ascii=False)
    else:
        text = _masked_text(body, controls)
    text = shown_text(text)
    return (text, False) if len(text) <= BODY_MAX else (text[:BODY_MAX], True)


def request_submission(
    *,
    method: str,
    url: str,
    body: str | None,
    content_type: str,
    form: bool,
    controls: Controls = NO_CONTROLS,
    button: str | None = None,
    button_text: str | None = None,
) -> Submission:
    """What a held request would send: its address, and its fields or a preview of its body."""
    method = method.upper()
    kind = content_type.split(";", 1)[0].strip().lower()
    pairs: list[tuple[str, str]] | None = None
    preview: tuple[str, bool] | None = None
    address_query = True
    if form and method in SAFE_METHODS:
        # A GET form's fields are its address's query: listed as fields, like a form read from the page.
        pairs = parse_qsl(urlsplit(url).query, keep_blank_values=True)
        address_query = False
    elif method in SAFE_METHODS or method == WEBSOCKET or not body:
        pairs = None
    elif kind == "application/x-www-form-urlencoded":
        pairs = parse_qsl(body, keep_blank_values=True)
    elif kind == "multipart/form-data":
        pairs = _multipart(body, content_type)
    else:
        preview = body_preview(body, controls)
    fields = [
        field_shown(
            name,
            value,
            secret=name in controls.secret_names or secret_name(name),
            hidden=name in controls.hidden_names,
            controls=controls,
        )
        for name, value in (pairs or [])[:FIELDS_MAX]
    ]
    listed, more = _listed(fields, len(pairs or []))
    name, text = _button(button, button_text)
    return {
        "form": form,
        "method": method,
        "address": address_shown(url, controls=controls, query=address_query),
        "button": name,
        "button_text": text,
        "fields": listed,
        "fields_more": more,
        "body": preview[0] if preview else None,
        "body_cut": preview[1] if preview else False,
    }
