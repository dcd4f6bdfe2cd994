"""Readable text from a fetched page: general page text, not an article reader.

HTML is parsed with selectolax (the Lexbor engine: an HTML5 parser, never run scripts);
everything visible is kept except scripts, styles, navigation, forms and other
non-text elements, with block elements on lines of their own and entities decoded by the
parser. Markdown and plain text are kept as they are. No publication date is inferred.
Lengths are counted in UTF-16 code units, as the contract counts them.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

from selectolax.lexbor import LexborHTMLParser, LexborNode

TEXT_MAX = 16_000  # UTF-16 code units of page text a tool returns
TITLE_MAX = 240

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
TEXT_TYPES = frozenset({"text/plain", "text/markdown", "text/x-markdown"})

# Never text a reader wants: code, styling, menus, forms, embedded documents and graphics.
_DROPPED = frozenset(
    {
        "script",
        "style",
        "noscript",
        "template",
        "nav",
        "form",
        "iframe",
        "frame",
        "frameset",
        "svg",
        "canvas",
        "object",
        "embed",
        "head",
        "select",
        "button",
        "dialog",
    }
)
_BLOCKS = frozenset(
    {
        "address",
        "article",
        "aside",
        "blockquote",
        "body",
        "caption",
        "dd",
        "details",
        "div",
        "dl",
        "dt",
        "fieldset",
        "figcaption",
        "figure",
        "footer",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "header",
        "hr",
        "li",
        "main",
        "ol",
        "p",
        "pre",
        "section",
        "summary",
        "table",
        "tbody",
        "td",
        "tfoot",
        "th",
        "thead",
        "tr",
        "ul",
    }
)
_SPACES = re.compile(r"[ \t\f\v\r\u00a0]+")
_BLANK_LINES = re.compile(r"\n{3,}")
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?([A-Za-z0-9_.:-]{1,40})""", re.IGNORECASE)


@dataclass(frozen=True)
class PageText:
    title: str
    text: str
    truncated: bool


def utf16_cut(text: str, limit: int) -> tuple[str, bool]:
    """Return text cut to at most `limit` UTF-16 code units (never inside a pair), and whether it was cut."""
    if len(text) <= limit // 2:
        return text, False  # even all-astral text this long fits
    units = 0
    for index, ch in enumerate(text):
        units += 2 if ord(ch) > 0xFFFF else 1
        if units > limit:
            return text[:index], True
    return text, False


def decode(body: bytes, charset: str | None) -> str:
    """Decode a text body with its declared charset (UTF-8 when none or unknown)."""
    encoding = "utf-8"
    if charset:
        try:
            encoding = codecs.lookup(charset).name
        except LookupError:
            encoding = "utf-8"
    # A download cut at its limit may end inside a character: that one is dropped.
    return body.decode(encoding, errors="replace").rstrip("\ufffd")


def html_text(body: bytes, charset: str | None) -> PageText:
    """Return the title and visible text of an HTML document."""
    document = LexborHTMLParser(decode(body, charset or _meta_charset(body)))
    title_node = document.css_first("title")
    title = _clean_line(title_node.text(deep=True)) if title_node is not None else ""
    lines: list[str] = []
    if document.body is not None:
        _collect(document.body, lines)
    text_lines = (line.strip() for line in "".join(lines).split("\n"))
    return page_text(title, "\n".join(line for line in text_lines if line))


def _meta_charset(body: bytes) -> str | None:
    """The charset a document declares in its first 1,024 bytes (HTML's prescan), if any."""
    found = _META_CHARSET.search(body[:1024])
    return found.group(1).decode("ascii") if found else None


def plain_text(body: bytes, charset: str | None) -> PageText:
    """Return Markdown or plain text as it is (line ends normalised)."""
    text = decode(body, charset).replace("\r\n", "\n").replace("\r", "\n")
    return page_text("", text)


def page_text(title: str, text: str) -> PageText:
    """Bound a page's title and text (text cleaned of runs of blank space)."""
    cleaned = _BLANK_LINES.sub("\n\n", "\n".join(line.rstrip() for line in text.split("\n"))).strip()
    text_cut, truncated = utf16_cut(cleaned, TEXT_MAX)
    title_cut, _ = utf16_cut(_clean_line(title), TITLE_MAX)
    return PageText(title=title_cut, text=text_cut, truncated=truncated)


def _clean_line(text: str) -> str:
    return " ".join(text.split())


def _collect(root: LexborNode, out: list[str]) -> None:
    """Append the node's visible text to `out`, blocks separated by line breaks (iteratively)."""
    stack: list[LexborNode | str] = [root]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
            continue
        if item.is_text_node:
            out.append(_SPACES.sub(" ", (item.text_content or "").replace("\n", " ")))
            continue
        if not item.is_element_node:
            continue
        tag = item.tag or ""
        if tag in _DROPPED or "hidden" in item.attributes:
            continue
        if tag == "br":
            out.append("\n")
            continue
        block = tag in _BLOCKS
        if block:
            out.append("\n")
            stack.append("\n")
        children = []
        child = item.child
        while child is not None:
            children.append(child)
            child = child.next
        stack.extend(reversed(children))
