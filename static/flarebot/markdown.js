// A small Markdown renderer for model answers that builds DOM nodes and never parses HTML.
//
// Model text is untrusted: every character ends up in a text node, elements come from a
// fixed list (p, h1-h6, strong, em, del, code, pre, ul, ol, li, blockquote, hr, br, a),
// no attribute but href/rel/target on links, start on lists and data-lang on code is ever
// set, and links keep only http(s) and mailto targets. Raw HTML is shown as the text it is.

const SAFE_PROTOCOLS = new Set(["http:", "https:", "mailto:"]);
const MAX_DEPTH = 12; // nested quotes/lists deeper than this are shown as plain paragraphs

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

function link(href, children) {
  const a = document.createElement("a");
  a.href = href;
  a.rel = "noopener noreferrer nofollow";
  a.target = "_blank";
  for (const child of children) a.append(child);
  return a;
}

function el(tag, children = []) {
  const node = document.createElement(tag);
  for (const child of children) node.append(child);
  return node;
}

// ---------------------------------------------------------------------------------------
// Inline

const PUNCT = /[!-/:-@[-`{-~]/;
const BARE_URL = /(?:https?:\/\/|mailto:)[^\s<>"]+/iy;
const AUTOLINK = /<((?:https?:\/\/|mailto:)[^\s<>]+)>/iy;
const BACKTICKS = /`+/y;

function at(regex, text, i) {
  regex.lastIndex = i;
  return regex.exec(text);
}

function findClosing(text, from, delim, misses) {
  // The closing delimiter must follow a non-space character. A search that failed from
  // some point fails from any later one too: remembering that keeps long texts full of
  // unmatched asterisks linear.
  if (from >= (misses.get(delim) ?? Infinity)) return -1;
  let i = from;
  while ((i = text.indexOf(delim, i)) !== -1) {
    if (i > from && !/\s/.test(text[i - 1]) && text[i - 1] !== "\\") return i;
    i += delim.length;
  }
  misses.set(delim, from);
  return -1;
}

function matchBracket(text, open) {
  let depth = 0;
  for (let i = open; i < text.length; i++) {
    const c = text[i];
    if (c === "\\") i++;
    else if (c === "`") {
      const end = text.indexOf("`", i + 1);
      if (end !== -1) i = end;
    } else if (c === "[") depth++;
    else if (c === "]" && --depth === 0) return i;
  }
  return -1;
}

function linkTarget(text, open) {
  // `(url)` or `(url "title")` or `(<url>)`; returns [url, end] or null.
  if (text[open] !== "(") return null;
  let depth = 0;
  for (let i = open; i < text.length; i++) {
    const c = text[i];
    if (c === "\\") i++;
    else if (c === "(") depth++;
    else if (c === ")" && --depth === 0) {
      let inner = text.slice(open + 1, i).trim();
      const titled = inner.match(/^(\S+)\s+("[^"]*"|'[^']*')$/);
      if (titled) inner = titled[1];
      if (inner.startsWith("<") && inner.endsWith(">")) inner = inner.slice(1, -1);
      return [inner, i + 1];
    } else if (c === "\n" && text[i + 1] === "\n") return null;
  }
  return null;
}

/** Parse inline Markdown into an array of nodes. */
export function parseInline(text, depth = 0) {
  const out = [];
  let buf = "";
  const flush = () => {
    if (buf) out.push(document.createTextNode(buf));
    buf = "";
  };
  const push = (node) => {
    flush();
    out.push(node);
  };
  const misses = new Map();
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (c === "\\" && i + 1 < text.length && PUNCT.test(text[i + 1])) {
      buf += text[i + 1];
      i += 2;
      continue;
    }
    if (c === "\\" && text[i + 1] === "\n") {
      push(el("br"));
      i += 2;
      continue;
    }
    if (c === "\n") {
      // A soft line break: chats treat it as a visible one.
      buf = buf.replace(/ +$/, "");
      push(el("br"));
      i += 1;
      while (text[i] === " ") i++;
      continue;
    }
    if (c === "`") {
      const run = at(BACKTICKS, text, i)[0];
      const end = text.indexOf(run, i + run.length);
      if (end !== -1 && text[end + run.length] !== "`") {
        let code = text.slice(i + run.length, end).replace(/\n/g, " ");
        if (/^ .*[^ ].* $/.test(code)) code = code.slice(1, -1);
        push(el("code", [code]));
        i = end + run.length;
        continue;
      }
      buf += run;
      i += run.length;
      continue;
    }
    const isImage = c === "!" && text[i + 1] === "[";
    if (c === "[" || isImage) {
      const open = isImage ? i + 1 : i;
      const close = matchBracket(text, open);
      const target = close !== -1 ? linkTarget(text, close + 1) : null;
      if (target) {
        const label = text.slice(open + 1, close);
        const href = safeHref(target[0]);
        // Images are never loaded: they become a link to the picture, labelled by its alt text.
        const children = depth < MAX_DEPTH ? parseInline(label || target[0], depth + 1) : [label];
        if (href) push(link(href, children));
        else {
          flush();
          out.push(...children); // an unsafe target keeps only its visible label
        }
        i = target[1];
        continue;
      }
    }
    if (c === "<") {
      const auto = at(AUTOLINK, text, i);
      if (auto) {
        const href = safeHref(auto[1]);
        if (href) {
          push(link(href, [auto[1]]));
          i += auto[0].length;
          continue;
        }
      }
    }
    if ((c === "h" || c === "H" || c === "m" || c === "M") && (i === 0 || /[\s(*_~]/.test(text[i - 1]))) {
      const bare = at(BARE_URL, text, i);
      if (bare) {
        let url = bare[0];
        // Trailing punctuation ends a sentence rather than the URL; keep balanced parens.
        while (/[.,;:!?'*_~]$/.test(url) || (url.endsWith(")") && count(url, "(") < count(url, ")"))) {
          url = url.slice(0, -1);
        }
        const href = safeHref(url);
        if (href && url.length > 8) {
          push(link(href, [url]));
          i += url.length;
          continue;
        }
      }
    }
    if ((c === "*" || c === "_" || c === "~") && depth < MAX_DEPTH) {
      const double = text[i + 1] === c;
      const delim = double ? c + c : c;
      const intraword = c === "_" && i > 0 && /[\p{L}\p{N}]/u.test(text[i - 1]);
      const opens = !intraword && text[i + delim.length] && !/\s/.test(text[i + delim.length]);
      if (opens && (c !== "~" || double)) {
        const end = findClosing(text, i + delim.length, delim, misses);
        const closesWord = end !== -1 && c === "_" && /[\p{L}\p{N}]/u.test(text[end + delim.length] || "");
        if (end !== -1 && !closesWord) {
          const tag = c === "~" ? "del" : double ? "strong" : "em";
          push(el(tag, parseInline(text.slice(i + delim.length, end), depth + 1)));
          i = end + delim.length;
          continue;
        }
      }
      buf += delim;
      i += delim.length;
      continue;
    }
    buf += c;
    i += 1;
  }
  flush();
  return out;
}

function count(text, ch) {
  return text.split(ch).length - 1;
}

// ---------------------------------------------------------------------------------------
// Blocks

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)[^`]*$/;
const HEADING = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/;
const RULE = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
const QUOTE = /^ {0,3}> ?(.*)$/;
const BULLET = /^( {0,3})([-*+])([ \t]+)(.*)$/;
const ORDERED = /^( {0,3})(\d{1,9})([.)])([ \t]+)(.*)$/;
const BLANK = /^\s*$/;

function listMarker(line) {
  let m = line.match(BULLET);
  if (m) return { ordered: false, indent: m[1].length + 1 + m[3].length, start: 1, text: m[4], bullet: m[2] };
  m = line.match(ORDERED);
  if (m) {
    const width = m[1].length + m[2].length + 1 + m[4].length;
    return { ordered: true, indent: width, start: Number(m[2]), text: m[5], bullet: m[3] };
  }
  // An empty item ("-" alone) is still an item.
  m = line.match(/^( {0,3})([-*+])$/);
  if (m) return { ordered: false, indent: m[1].length + 2, start: 1, text: "", bullet: m[2] };
  return null;
}

function startsBlock(line) {
  return FENCE.test(line) || HEADING.test(line) || RULE.test(line) || QUOTE.test(line) || listMarker(line) !== null;
}

function dedent(line, n) {
  let i = 0;
  while (i < n && i < line.length && line[i] === " ") i++;
  return line.slice(i);
}

/** Parse block Markdown lines into an array of nodes. */
function parseBlocks(lines, depth) {
  const out = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (BLANK.test(line)) {
      i++;
      continue;
    }
    let m = line.match(FENCE);
    if (m) {
      const fence = m[1];
      const closing = new RegExp(`^ {0,3}${fence[0]}{${fence.length},}\\s*$`);
      const indent = line.length - line.trimStart().length;
      const body = [];
      i++;
      // An unclosed fence (a streaming answer) runs to the end.
      while (i < lines.length && !closing.test(lines[i])) {
        body.push(dedent(lines[i], indent));
        i++;
      }
      i++;
      const code = el("code", [body.join("\n")]);
      if (m[2]) code.dataset.lang = m[2].slice(0, 40);
      out.push(el("pre", [code]));
      continue;
    }
    m = line.match(HEADING);
    if (m) {
      out.push(el(`h${m[1].length}`, parseInline(m[2] || "", depth)));
      i++;
      continue;
    }
    if (RULE.test(line)) {
      out.push(el("hr"));
      i++;
      continue;
    }
    if (QUOTE.test(line) && depth < MAX_DEPTH) {
      const inner = [];
      while (i < lines.length && !BLANK.test(lines[i])) {
        const q = lines[i].match(QUOTE);
        if (q) inner.push(q[1]);
        else if (startsBlock(lines[i])) break;
        else inner.push(lines[i]); // lazy continuation
        i++;
      }
      out.push(el("blockquote", parseBlocks(inner, depth + 1)));
      continue;
    }
    const marker = listMarker(line);
    if (marker && depth < MAX_DEPTH) {
      const list = el(marker.ordered ? "ol" : "ul");
      if (marker.ordered && marker.start !== 1) list.start = marker.start;
      let loose = false;
      while (i < lines.length) {
        const item = listMarker(lines[i]);
        if (!item || item.ordered !== marker.ordered || item.bullet !== marker.bullet) break;
        const body = [item.text];
        i++;
        let sawBlank = false;
        while (i < lines.length) {
          const next = lines[i];
          if (BLANK.test(next)) {
            sawBlank = true;
            body.push("");
            i++;
            continue;
          }
          const indented = next.length - next.trimStart().length >= item.indent;
          if (indented) {
            body.push(dedent(next, item.indent));
          } else if (!sawBlank && !startsBlock(next)) {
            body.push(next.trimStart()); // lazy continuation of the item's paragraph
          } else {
            break;
          }
          sawBlank = false;
          i++;
        }
        while (body.length && body[body.length - 1] === "") body.pop();
        if (sawBlank && i < lines.length && listMarker(lines[i])) loose = true;
        list.append(el("li", parseBlocks(body, depth + 1)));
      }
      if (!loose) {
        // Tight lists show their items' paragraphs inline.
        for (const li of list.children) {
          for (const p of [...li.children]) if (p.tagName === "P") p.replaceWith(...p.childNodes);
        }
      }
      out.push(list);
      continue;
    }
    const para = [];
    while (i < lines.length && !BLANK.test(lines[i]) && !(para.length && startsBlock(lines[i]))) {
      para.push(lines[i].trimStart());
      i++;
    }
    if (!para.length) {
      para.push(lines[i]); // deeper than MAX_DEPTH: shown as text
      i++;
    }
    out.push(el("p", parseInline(para.join("\n"), depth)));
  }
  return out;
}

/** Render Markdown text into a DocumentFragment of safe elements. */
export function renderMarkdown(text) {
  const fragment = document.createDocumentFragment();
  const lines = String(text).replace(/\r\n?/g, "\n").replace(/\t/g, "    ").split("\n");
  fragment.append(...parseBlocks(lines, 0));
  return fragment;
}
