"""The chat page's Markdown renderer (static/flarebot/markdown.js) in real Chromium.

Model answers are untrusted: whatever they contain must end up as text, safe links and a
fixed set of elements. One test streams a hostile answer through the whole stack; the
others call the renderer module directly in the page, case by case.
"""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Page, expect

from flarebot.core.models import Installation
from tests.e2e.chat_support import last_answer, open_conversation, send
from tests.support.fake_providers import FakeProviders, Text
from tests.support.live_clients import OwnerClient

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


HOSTILE = [
    "Hello <script>window.__pwned = 'script'</script> there.\n\n",
    "<img src=x onerror=\"window.__pwned = 'img'\">\n\n",
    "[click me](javascript:window.__pwned='link') and [again](JaVaScRiPt:window.__pwned='case')\n\n",
    "[tabbed](java\tscript:window.__pwned='tab') [data](data:text/html,<script>alert(1)</script>)\n\n",
    "[vb](vbscript:msgbox(1)) [file](file:///etc/passwd) [relative](/admin/) [proto](//evil.example/x)\n\n",
    "<a href=\"javascript:window.__pwned='raw'\" onclick=\"window.__pwned='click'\">raw link</a>\n\n",
    "<iframe src=\"javascript:window.__pwned='iframe'\"></iframe><svg onload=\"window.__pwned='svg'\"></svg>\n\n",
    '<div style="position:fixed;inset:0" onmouseover="window.__pwned=\'style\'">cover</div>\n\n',
    "![pic](javascript:window.__pwned='image') **bold <b onmouseover=alert(1)>x</b>**\n\n",
    "```html\n<script>window.__pwned = 'fenced'</script>\n```\n\n",
    "Safe: [docs](https://example.com/docs?a=1&b=2), <https://example.org/auto>, [mail](mailto:owner@example.com)",
]


def test_it_renders_a_hostile_answer_as_inert_text(
    chat_page: Page, live_owner: OwnerClient, anthropic_key: str, fake_providers: FakeProviders
) -> None:
    page = chat_page
    fake_providers.script([Text(chunk, delay=0.02) for chunk in HOSTILE])
    conversation_id = live_owner.create_conversation("Hostile")
    open_conversation(page, conversation_id)

    send(page, "Say something nasty.")

    answer = last_answer(page)
    expect(answer).to_contain_text("Safe: docs")
    expect(page.locator("#stop")).to_be_hidden()
    expect(answer).to_contain_text("<script>window.__pwned = 'script'</script>")
    expect(answer).to_contain_text("<img src=x onerror=")
    expect(answer.locator("pre code")).to_have_text("<script>window.__pwned = 'fenced'</script>")
    answer.locator("p").first.hover()
    answer.get_by_text("cover").hover()
    dom = transcript_dom(page)
    assert dom["tags"] - {"DIV", "SPAN", "ARTICLE", "P", "A", "STRONG", "PRE", "CODE", "BR", "BUTTON", "TIME"} == set()
    # Buttons and times are the page's own controls, never the answer's.
    assert set(dom["buttons"]) <= {"copy-code", "msg-action copy", "msg-action regenerate", "msg-action retry"}
    assert set(dom["buttons"]) >= {"copy-code", "msg-action copy", "msg-action regenerate"}
    assert dom["handlers"] == []
    assert dom["styled"] == []
    assert sorted(dom["hrefs"]) == sorted(
        ["https://example.com/docs?a=1&b=2", "https://example.org/auto", "mailto:owner@example.com"]
    )
    assert all(rel == "noopener noreferrer nofollow" for rel in dom["rels"])
    assert all(target == "_blank" for target in dom["targets"])
    assert page.evaluate("window.__pwned") is None
    # Unsafe links keep their label as plain text.
    expect(answer).to_contain_text("click me and again")
    expect(answer.get_by_role("link", name="click me")).to_have_count(0)

    page.reload()
    expect(last_answer(page)).to_contain_text("Safe: docs")
    assert transcript_dom(page)["hrefs"] == dom["hrefs"]
    assert page.evaluate("window.__pwned") is None


def transcript_dom(page: Page) -> dict[str, Any]:
    """Describe the transcript's live DOM: element kinds, handler and style attributes, links."""
    result: dict[str, Any] = page.evaluate(
        """() => {
            const all = [...document.querySelectorAll("#transcript-inner *")];
            const links = [...document.querySelectorAll("#transcript-inner a")];
            return {
                tags: all.map((e) => e.tagName),
                buttons: all.filter((e) => e.tagName === "BUTTON" && e.closest(".msg.assistant, .answer-actions"))
                    .map((e) => e.className),
                handlers: all.flatMap((e) => [...e.attributes].filter((a) => /^on/i.test(a.name)).map((a) => a.name)),
                styled: all.filter((e) => e.hasAttribute("style")).map((e) => e.tagName),
                hrefs: links.map((a) => a.getAttribute("href")),
                rels: links.map((a) => a.rel),
                targets: links.map((a) => a.target),
            };
        }"""
    )
    result["tags"] = set(result["tags"])
    return result


def render(page: Page, markdowns: list[str]) -> list[str]:
    """Return the HTML the renderer builds for each Markdown text."""
    return list(
        page.evaluate(
            """async (texts) => {
                const { renderMarkdown, markdownReady } = await import("/static/flarebot/markdown.js");
                await markdownReady();
                return texts.map((text) => {
                    const box = document.createElement("div");
                    box.append(renderMarkdown(text));
                    return box.innerHTML;
                });
            }""",
            markdowns,
        )
    )


@pytest.fixture
def module_page(page: Page, owner: Installation) -> Page:
    """Any page of the app (same origin, same Content-Security-Policy) to load the module in."""
    page.goto("/login/")
    return page


LINK = 'rel="noopener noreferrer nofollow" target="_blank"'


RENDERED = [
    ("Just text.", "<p>Just text.</p>"),
    ("# Title\n## Sub *title*", "<h1>Title</h1><h2>Sub <em>title</em></h2>"),
    (
        "**bold**, *it*, _it_, ~~gone~~, `x < y`",
        "<p><strong>bold</strong>, <em>it</em>, <em>it</em>, <del>gone</del>, <code>x &lt; y</code></p>",
    ),
    ("snake_case_name and 2 * 3 * 4", "<p>snake_case_name and 2 * 3 * 4</p>"),
    ("one\ntwo", "<p>one<br>two</p>"),
    (
        "```js\nlet a = 1;\n\nlet b = '<b>';\n```",
        "<pre><code data-lang=\"js\">let a = 1;\n\nlet b = '&lt;b&gt;';</code></pre>",
    ),
    ("```\nunclosed while streaming", '<pre data-open=""><code>unclosed while streaming</code></pre>'),
    ("- a\n- b\n  - nested\n- c", "<ul><li>a</li><li>b<ul><li>nested</li></ul></li><li>c</li></ul>"),
    ("3. three\n4. four", '<ol start="3"><li>three</li><li>four</li></ol>'),
    ("> quoted\n> **text**", "<blockquote><p>quoted<br><strong>text</strong></p></blockquote>"),
    ("---", "<hr>"),
    ("[a](https://example.com/x_(y))", f'<p><a href="https://example.com/x_(y)" {LINK}>a</a></p>'),
    ("see https://example.com/a.", f'<p>see <a href="https://example.com/a" {LINK}>https://example.com/a</a>.</p>'),
    ("\\*not em\\*", "<p>*not em*</p>"),
    ("<b>raw</b> & co", "<p>&lt;b&gt;raw&lt;/b&gt; &amp; co</p>"),
]


def test_it_renders_markdown_to_the_expected_elements(module_page: Page) -> None:
    markdowns = [markdown for markdown, _ in RENDERED]
    assert list(zip(markdowns, render(module_page, markdowns), strict=True)) == RENDERED


LINK_TARGETS = [
    ("https://example.com/", "https://example.com/"),
    ("http://example.com/a?b=c#d", "http://example.com/a?b=c#d"),
    ("mailto:owner@example.com", "mailto:owner@example.com"),
    ("javascript:alert(1)", None),
    ("JAVASCRIPT:alert(1)", None),
    ("java%0ascript:alert(1)", None),
    ("&#106;avascript:alert(1)", None),
    ("data:text/html;base64,PHNjcmlwdD4=", None),
    ("vbscript:msgbox(1)", None),
    ("file:///etc/passwd", None),
    ("/relative/path", None),
    ("//evil.example/", None),
]


def test_it_keeps_only_http_and_mailto_links(module_page: Page) -> None:
    rendered = render(module_page, [f"[label]({target})" for target, _ in LINK_TARGETS])
    expected = [
        "<p>label</p>" if href is None else f'<p><a href="{href.replace("&", "&amp;")}" {LINK}>label</a></p>'
        for _, href in LINK_TARGETS
    ]
    assert list(zip(LINK_TARGETS, rendered, strict=True)) == list(zip(LINK_TARGETS, expected, strict=True))


def test_it_renders_a_long_answer_full_of_unmatched_markers(module_page: Page) -> None:
    # Unmatched markers stay text (and keep the renderer linear: it runs on every frame).
    markers = "*a _b [c ~d <e " * 2000
    text = markers + "\n\n" + ("- item **bold**\n" * 500)
    counts = module_page.evaluate(
        """async (text) => {
            const { renderMarkdown, markdownReady } = await import("/static/flarebot/markdown.js");
            await markdownReady();
            const box = document.createElement("div");
            box.append(renderMarkdown(text));
            return [box.querySelector("p").textContent, box.querySelectorAll("li > strong").length];
        }""",
        text,
    )
    assert counts == [markers.rstrip(), 500]  # a paragraph ends without its trailing space


GFM = [
    (
        "| Name | Qty | Price |\n| :--- | :-: | ---: |\n| **Tea** | 2 | 3.50 |\n| Milk \\| oat | 1 |",
        '<table><thead><tr><th data-align="left">Name</th><th data-align="center">Qty</th>'
        '<th data-align="right">Price</th></tr></thead><tbody><tr><td data-align="left"><strong>Tea</strong></td>'
        '<td data-align="center">2</td><td data-align="right">3.50</td></tr>'
        '<tr><td data-align="left">Milk | oat</td><td data-align="center">1</td><td data-align="right"></td></tr>'
        "</tbody></table>",
    ),
    (
        "- [x] done\n- [ ] to do\n- [] not a task",
        '<ul><li><input type="checkbox" disabled="" checked=""> done</li>'
        '<li><input type="checkbox" disabled=""> to do</li><li>[] not a task</li></ul>',
    ),
    ("~~gone~~ and ~~not closed", "<p><del>gone</del> and ~~not closed</p>"),
    (
        "see www.example.com/a, https://example.org. and mail@example.com or example.org",
        f'<p>see <a href="http://www.example.com/a" {LINK}>www.example.com/a</a>, '
        f'<a href="https://example.org/" {LINK}>https://example.org</a>. and mail@example.com or example.org</p>',
    ),
    ("```python\nprint(1)\n```", '<pre><code data-lang="python">print(1)</code></pre>'),
    ("```py\nstill streaming", '<pre data-open=""><code data-lang="py">still streaming</code></pre>'),
    ("![chart](https://example.com/c.png)", f'<p><a href="https://example.com/c.png" {LINK}>chart</a></p>'),
]


def test_it_renders_github_tables_task_lists_strikethrough_and_autolinks(module_page: Page) -> None:
    markdowns = [markdown for markdown, _ in GFM]
    assert list(zip(markdowns, render(module_page, markdowns), strict=True)) == GFM
