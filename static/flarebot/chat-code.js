// Code blocks of rendered answers: a header with the block's language and a Copy button,
// and syntax highlighting by the vendored highlight.js (static/vendor/highlight/), loaded
// only once a page shows a code block and applied only to blocks whose fence is closed:
// a block still streaming (`pre[data-open]`) stays plain until its closing fence arrives.
// A block is highlighted when it comes near the screen, so a long transcript loads no
// grammar and spends no time on blocks nobody scrolled to.
//
// Answers are re-rendered once per frame while they stream, so a highlighted block is
// kept by its language and text and cloned again on the next frames instead of being
// highlighted anew. highlight.js returns HTML; it is parsed in an inert document and only
// its spans (with hljs class names) and text are copied over, so nothing of the model's
// text can become an element or an attribute.

import { el } from "./dom.js";

const VENDOR = "/static/vendor/highlight/";
// The grammars vendored, and the names answers use for them.
const GRAMMARS = new Set([
  "bash", "c", "cpp", "css", "diff", "dockerfile", "go", "ini", "java", "javascript", "json",
  "markdown", "plaintext", "python", "rust", "shell", "sql", "typescript", "xml", "yaml",
]);
const ALIASES = {
  sh: "bash", zsh: "bash", console: "shell", js: "javascript", jsx: "javascript", mjs: "javascript",
  ts: "typescript", tsx: "typescript", py: "python", python3: "python", rs: "rust", golang: "go",
  html: "xml", svg: "xml", "c++": "cpp", cc: "cpp", h: "c", hpp: "cpp", yml: "yaml", toml: "ini",
  md: "markdown", patch: "diff", docker: "dockerfile", text: "plaintext", txt: "plaintext", postgresql: "sql",
};
const CACHE_MAX = 300;
const CLASS_NAME = /^(?:hljs-[\w-]+|[\w-]+_+)$/;

let core = null; // Promise of highlight.js's core
const grammars = new Map(); // name -> Promise of its registration
const cache = new Map(); // "lang\0code" -> DocumentFragment of highlighted nodes
const waiting = new Set(); // code elements to highlight once their grammar is in
// A long transcript's blocks are highlighted as they come near the screen, not all at load.
const nearby = new IntersectionObserver(
  (entries) => {
    for (const { target, isIntersecting } of entries) {
      // A block re-rendered away (the answer streams on) is dropped at its first report.
      if (!target.isConnected) nearby.unobserve(target);
      else if (isIntersecting) {
        nearby.unobserve(target);
        highlight(target, target.dataset.grammar);
      }
    }
  },
  { rootMargin: "600px 0px" },
);

/** Return the vendored grammar for a fence's language, or null. */
export function grammarOf(lang) {
  const name = String(lang || "").toLowerCase();
  const grammar = ALIASES[name] || name;
  return GRAMMARS.has(grammar) ? grammar : null;
}

function loadCore() {
  if (!core) {
    const theme = document.createElement("link");
    theme.rel = "stylesheet";
    theme.href = `${VENDOR}theme.css`;
    document.head.append(theme);
    core = import(`${VENDOR}core.min.js`).then((module) => module.default);
  }
  return core;
}

function loadGrammar(name) {
  let loading = grammars.get(name);
  if (!loading) {
    loading = Promise.all([loadCore(), import(`${VENDOR}languages/${name}.min.js`)]).then(([hljs, grammar]) => {
      hljs.registerLanguage(name, grammar.default);
      return hljs;
    });
    grammars.set(name, loading);
  }
  return loading;
}

/** Copy the spans and text of highlight.js's HTML into a fragment of new nodes. */
function nodesOf(html) {
  const parsed = new DOMParser().parseFromString(`<pre>${html}</pre>`, "text/html").body.firstChild;
  const copy = (from, to) => {
    for (const child of from.childNodes) {
      if (child.nodeType === Node.TEXT_NODE) to.append(child.data);
      else if (child.nodeType === Node.ELEMENT_NODE) {
        const span = document.createElement("span");
        const names = [...child.classList].filter((name) => CLASS_NAME.test(name));
        if (names.length) span.className = names.join(" ");
        copy(child, span);
        to.append(span);
      }
    }
  };
  const fragment = document.createDocumentFragment();
  copy(parsed, fragment);
  return fragment;
}

function highlighted(hljs, grammar, text) {
  const key = `${grammar}\u0000${text}`;
  let fragment = cache.get(key);
  if (!fragment) {
    try {
      fragment = nodesOf(hljs.highlight(text, { language: grammar, ignoreIllegals: true }).value);
    } catch {
      fragment = document.createDocumentFragment();
      fragment.append(text);
    }
    if (cache.size >= CACHE_MAX) cache.delete(cache.keys().next().value);
    cache.set(key, fragment);
  }
  return fragment.cloneNode(true);
}

function apply(code, hljs, grammar) {
  const text = code.textContent;
  code.replaceChildren(highlighted(hljs, grammar, text));
  code.classList.add("hljs");
}

/** Highlight a closed block now if its grammar is in, else once it is. */
function highlight(code, grammar) {
  const key = `${grammar}\u0000${code.textContent}`;
  if (cache.has(key)) {
    code.replaceChildren(cache.get(key).cloneNode(true));
    code.classList.add("hljs");
    return;
  }
  waiting.add(code);
  loadGrammar(grammar)
    .then((hljs) => {
      if (!waiting.delete(code) || !code.isConnected) return;
      apply(code, hljs, grammar);
    })
    .catch(() => waiting.delete(code)); // no highlighting: the block stays readable as it is
}

/** Give each code block under `root` its header, and highlight the closed ones. */
export function decorateCode(root) {
  for (const pre of root.querySelectorAll("pre")) {
    const code = pre.querySelector("code");
    if (!code || pre.parentElement.classList.contains("code-block")) continue;
    const lang = code.dataset.lang || "";
    const block = el("div", "code-block");
    const head = el("div", "code-head");
    const copy = el("button", "copy-code", "Copy");
    copy.type = "button";
    copy.setAttribute("aria-label", lang ? `Copy ${lang} code` : "Copy code");
    head.append(el("span", "code-lang", lang || "text"), copy);
    pre.replaceWith(block);
    block.append(head, pre);
    const grammar = grammarOf(lang);
    if (!grammar || "open" in pre.dataset) continue;
    if (cache.has(`${grammar}\u0000${code.textContent}`)) highlight(code, grammar); // a clone: at once
    else {
      code.dataset.grammar = grammar;
      nearby.observe(code);
    }
  }
}
