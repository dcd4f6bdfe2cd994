// Search in the sidebar: conversation titles and message text through
// `GET /api/conversations/?q=` (the server's full-text search, at most 50 results, each with
// a plain-text snippet). One row per conversation: its best match, with the matched words
// marked (the server says where), and how many more of its messages matched. While a query
// is typed the results take the list's place; Escape or clearing the field brings the list
// back. A result opens its conversation at the message that matched, marked.

import { ApiError, api } from "./api.js";
import { MAX_QUERY, isAbort, ui } from "./chat-shell.js";
import { el, numbers } from "./dom.js";
import { select } from "./chat-sidebar.js";

const DEBOUNCE_MS = 250;
const $ = (id) => document.getElementById(id);
const form = $("search-form");
const input = $("search");
const area = $("search-area");
const status = $("search-status");
const results = $("search-results");

let timer = 0;
let controller = null;

function setSearching(on) {
  area.hidden = !on;
  ui.list.hidden = on;
  if (on) ui.listEmpty.hidden = true;
  else ui.listEmpty.hidden = ui.list.children.length > 0;
}

/** Empty the field and show the conversation list again. */
export function clearSearch() {
  clearTimeout(timer);
  if (controller) controller.abort();
  input.value = "";
  results.replaceChildren();
  status.textContent = "";
  setSearching(false);
}

/** The snippet as text with <mark> around the ranges the server matched (never parsed as HTML). */
function markedSnippet(snippet, highlights) {
  const span = el("span", "result-snippet");
  let at = 0;
  for (const [start, end] of highlights || []) {
    if (start < at || end > snippet.length || end <= start) continue;
    span.append(snippet.slice(at, start), el("mark", "", snippet.slice(start, end)));
    at = end;
  }
  span.append(snippet.slice(at));
  return span;
}

function resultItem(result) {
  const { conversation, message_id: messageId, snippet, highlights, matches } = result;
  const li = el("li", "search-result");
  const link = el("a", "search-link");
  link.href = `/?c=${conversation.id}`;
  link.dataset.conversationId = conversation.id;
  link.append(el("span", "result-name", conversation.name));
  if (messageId && snippet) link.append(markedSnippet(snippet, highlights));
  const more = (matches || 1) - 1;
  if (more > 0) link.append(el("span", "result-more", `and ${numbers.format(more)} more`));
  link.addEventListener("click", (event) => {
    if (event.ctrlKey || event.metaKey || event.shiftKey || event.button !== 0) return;
    event.preventDefault();
    select(conversation.id, { message: messageId });
  });
  li.append(link);
  return li;
}

async function run() {
  clearTimeout(timer);
  const query = input.value;
  if (!query.trim()) {
    clearSearch();
    return;
  }
  setSearching(true);
  if (query.length > MAX_QUERY) {
    results.replaceChildren();
    status.textContent = `A search is at most ${numbers.format(MAX_QUERY)} characters.`;
    return;
  }
  if (controller) controller.abort();
  controller = new AbortController();
  status.textContent = "Searching…";
  try {
    const data = await api(`/api/conversations/?q=${encodeURIComponent(query)}`, { signal: controller.signal });
    const found = data.results || [];
    results.replaceChildren(...found.map(resultItem));
    status.textContent = found.length
      ? `${found.length} ${found.length === 1 ? "conversation" : "conversations"}`
      : "Nothing found.";
  } catch (error) {
    if (isAbort(error)) return;
    results.replaceChildren();
    status.textContent = error instanceof ApiError ? error.message : "Search is not available right now.";
  }
}

input.addEventListener("input", () => {
  clearTimeout(timer);
  timer = setTimeout(run, DEBOUNCE_MS);
});
input.addEventListener("keydown", (event) => {
  if (event.key === "Escape" && input.value) {
    event.preventDefault(); // this Escape is spent: it closes no sidebar and stops no answer
    clearSearch();
  } else if (event.key === "ArrowDown" && !area.hidden) {
    const first = results.querySelector("a");
    if (first) {
      event.preventDefault();
      first.focus();
    }
  }
});
results.addEventListener("keydown", (event) => {
  if (event.key !== "ArrowDown" && event.key !== "ArrowUp") return;
  const links = [...results.querySelectorAll("a")];
  const at = links.indexOf(document.activeElement);
  if (at === -1) return;
  event.preventDefault();
  const next = links[at + (event.key === "ArrowDown" ? 1 : -1)];
  (next || (event.key === "ArrowUp" ? input : links[at])).focus();
});
form.addEventListener("submit", (event) => {
  event.preventDefault();
  run();
});
