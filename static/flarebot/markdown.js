// Markdown of model answers as DOM nodes: markdown-it (vendored, raw HTML off) parses, this
// module builds the elements from its tokens and never parses or assigns HTML.
//
// Model text is untrusted: every character ends up in a text node, elements come from a
// fixed list (p, h1-h6, strong, em, del, code, pre, ul, ol, li, blockquote, hr, br, a,
// table, thead, tbody, tr, th, td, and a disabled checkbox input for task list items), no
// attribute but href/rel/target on links, start on lists, data-lang on code, data-open on
// the pre of a fence that is not closed yet (a streaming answer), data-align on table cells
// and type/checked/disabled on task checkboxes is ever set, and links keep only http(s) and
// mailto targets. Raw HTML is shown as the text it is; images are never loaded (they become
// a link to the picture, labelled by its alt text).
//
// Beyond CommonMark: GitHub's tables, task lists, strikethrough and bare URLs as links.
// Soft line breaks show as line breaks, as chats do. bench/commonmark.py measures the
// result against the spec's own examples.
//
// markdown-it is most of the page's script: it is fetched when the first transcript is
// (markdownReady), in parallel with it, so that it never holds up the page's first paint.

const SAFE_PROTOCOLS = new Set(["http:", "https:", "mailto:"]);
const MAX_NESTING = 40; // deeper quotes and lists are shown as text (markdown-it's own guard)
const LANG_MAX = 40;

// Bare links as GitHub reads them: a scheme or "www."; a bare domain ("example.org") or an
// e-mail address stays text (see LINKIFIED). Finding "www." links needs linkify's fuzzy
// search, which doubles the parse time of every text: only a text holding "www." gets it.
function parser(markdownit, { fuzzy }) {
  const md = markdownit({ html: false, linkify: true, breaks: true, typographer: false, maxNesting: MAX_NESTING });
  md.linkify.set({ fuzzyLink: fuzzy, fuzzyEmail: false });
  // Every target is judged once, by safeHref, when the element is built: an unsafe one
  // keeps its label as text instead of showing the whole "[label](target)" source.
  md.validateLink = () => true;
  return md;
}
let md = null;
let mdWww = null;
let loading = null;

/** Load the parser once; resolves when renderMarkdown can render. */
export function markdownReady() {
  loading ??= import("../vendor/markdown-it/markdown-it.min.js").then(
    ({ default: markdownit }) => {
      md = parser(markdownit, { fuzzy: false });
      mdWww = parser(markdownit, { fuzzy: true });
    },
    (error) => {
      loading = null; // the next load tries again
      throw error;
    },
  );
  return loading;
}

/** Return a safe absolute href for a link target, or null. */
export function safeHref(raw) {
  // Browsers ignore whitespace and control characters inside schemes ("java\tscript:"):
  // strip them before judging, and judge by the parsed protocol, never by a prefix.
  const cleaned = String(raw).replace(/[\u0000-\u0020\u007f-\u009f]/g, "");
  if (!cleaned) return null;
  let url;
  try {
    url = new URL(cleaned);
  } catch {
    return null; // relative or malformed: no base to resolve against on purpose
  }
  if (!SAFE_PROTOCOLS.has(url.protocol)) return null;
  if (url.protocol !== "mailto:" && !url.hostname) return null;
  return url.href;
}

function link(href) {
  const a = document.createElement("a");
  a.href = href;
  a.rel = "noopener noreferrer nofollow";
  a.target = "_blank";
  return a;
}

// Tags a token may open, as the element built for it.
const BLOCK_TAGS = new Set(["p", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "li", "blockquote"]);
const TABLE_TAGS = new Set(["table", "thead", "tbody", "tr", "th", "td"]);
const INLINE_TAGS = { em: "em", strong: "strong", s: "del" };
const TASK = /^\[([ xX])\](?:[ \t]|$)/;
const CLOSING_FENCE = /^ {0,3}(`{3,}|~{3,})[ \t]*$/;
const LINKIFIED = /^(?:https?:\/\/|mailto:|www\.)/i;

function alignOf(token) {
  const style = token.attrGet("style") || "";
  const match = style.match(/text-align:(left|right|center)/);
  return match ? match[1] : "";
}

/** Append the nodes of inline tokens to `parent`. */
function inline(tokens, parent) {
  const stack = [parent];
  const top = () => stack[stack.length - 1];
  tokens.forEach((token, index) => {
    switch (token.type) {
      case "text":
      case "html_inline":
        top().append(token.content);
        break;
      case "softbreak":
      case "hardbreak":
        top().append(document.createElement("br"));
        break;
      case "code_inline":
        top().append(Object.assign(document.createElement("code"), { textContent: token.content }));
        break;
      case "link_open": {
        const text = tokens[index + 1]?.content || "";
        const bare = token.markup === "linkify" && !LINKIFIED.test(text);
        const href = bare ? null : safeHref(token.attrGet("href") || "");
        // An unsafe target keeps only its visible label: its children go into a fragment.
        const node = href ? link(href) : document.createDocumentFragment();
        stack.push(node);
        break;
      }
      case "link_close": {
        const node = stack.pop();
        top().append(node);
        break;
      }
      case "image": {
        const href = safeHref(token.attrGet("src") || "");
        const alt = md.renderer.renderInlineAsText(token.children || [], md.options, {});
        const label = alt || (href ? token.attrGet("src") : "");
        if (href) {
          const a = link(href);
          a.textContent = label;
          top().append(a);
        } else top().append(label);
        break;
      }
      default: {
        const tag = INLINE_TAGS[token.tag];
        if (!tag) break;
        if (token.nesting === 1) stack.push(document.createElement(tag));
        else if (token.nesting === -1 && stack.length > 1) {
          const node = stack.pop();
          top().append(node);
        }
      }
    }
  });
  while (stack.length > 1) {
    const node = stack.pop();
    top().append(node);
  }
}

/** Turn "[ ] " or "[x] " at the start of a list item into a disabled checkbox. */
function taskBox(children) {
  const first = children[0];
  const match = first && first.type === "text" ? first.content.match(TASK) : null;
  if (!match) return null;
  first.content = first.content.slice(match[0].length);
  const box = document.createElement("input");
  box.type = "checkbox";
  box.disabled = true;
  box.defaultChecked = match[1] !== " "; // the attribute, so that a copy of the DOM keeps it
  return box;
}

function codeBlock(token, lines) {
  const code = document.createElement("code");
  code.textContent = token.content.replace(/\n$/, "");
  const pre = document.createElement("pre");
  pre.append(code);
  if (token.type === "fence") {
    const lang = md.utils.unescapeAll(token.info).trim().split(/\s+/)[0];
    if (lang) code.dataset.lang = lang.slice(0, LANG_MAX);
    // Closed only if its last line is a closing fence of the same kind, at least as long.
    const [start, end] = token.map || [0, 0];
    const last = end - 1 > start ? lines[end - 1].match(CLOSING_FENCE) : null;
    const closed = last && last[1][0] === token.markup[0] && last[1].length >= token.markup.length;
    if (!closed) pre.dataset.open = "";
  }
  return pre;
}

/** Render Markdown text into a DocumentFragment of safe elements. */
export function renderMarkdown(text) {
  const source = String(text);
  if (!md) {
    // Not loaded (yet): the text as it is, which is still safe and readable.
    const p = document.createElement("p");
    p.textContent = source;
    const fragment = document.createDocumentFragment();
    fragment.append(p);
    markdownReady();
    return fragment;
  }
  const tokens = (/www\./i.test(source) ? mdWww : md).parse(source, {});
  const lines = source.replace(/\r\n?/g, "\n").split("\n");
  const fragment = document.createDocumentFragment();
  const stack = [fragment];
  const top = () => stack[stack.length - 1];
  let item = null; // the list item whose first paragraph may start with a task box
  for (const token of tokens) {
    if (token.type === "inline") {
      const children = token.children || [];
      const box = item ? taskBox(children) : null;
      item = null;
      if (box) top().append(box, " ");
      inline(children, top());
    } else if (token.type === "fence" || token.type === "code_block") {
      top().append(codeBlock(token, lines));
      item = null;
    } else if (token.type === "hr") {
      top().append(document.createElement("hr"));
    } else if (token.type === "html_block") {
      const p = document.createElement("p");
      p.textContent = token.content.replace(/\n$/, "");
      top().append(p);
    } else if (token.nesting === 1) {
      const tag = token.tag;
      // A tight list's paragraphs are hidden: their text goes straight into the item.
      if (token.hidden || !(BLOCK_TAGS.has(tag) || TABLE_TAGS.has(tag))) {
        stack.push(document.createDocumentFragment());
        continue;
      }
      const node = document.createElement(tag);
      if (tag === "ol") {
        const start = token.attrGet("start");
        if (start !== null && Number(start) !== 1) node.start = Number(start);
      }
      if (tag === "th" || tag === "td") {
        const align = alignOf(token);
        if (align) node.dataset.align = align;
      }
      item = tag === "li" ? node : item && tag === "p" ? item : null;
      stack.push(node);
    } else if (token.nesting === -1 && stack.length > 1) {
      const node = stack.pop();
      top().append(node);
    }
  }
  return fragment;
}
