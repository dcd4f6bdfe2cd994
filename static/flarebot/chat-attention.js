// The needs-you list in the header (PROTOCOL.md "Needs you"): what waits for the owner
// across conversations, its count on the button and the list one click away. Each entry
// opens the exact card (`path`: `/?c=<id>#browser-task-<proposal>` or `#turn-<id>`); the
// list is read again whenever a socket says `attention_changed`, and when the tab is shown.
// Imports: chat.js -> this -> sidebar -> shell -> api, dom.

import { api } from "./api.js";
import { state, ui } from "./chat-shell.js";
import { closeSidebar, select } from "./chat-sidebar.js";
import { el } from "./dom.js";

const RELOAD_AFTER_MS = 300; // a burst of changes is read once
const KINDS = {
  critical_point: "Question",
  sign_in: "Sign-in",
  email_consent: "Email consent",
  browser_task_proposal: "Proposed task",
  task_run_failed: "Run failed",
  task_run_missed: "Run missed",
  tool_unavailable: "Tool not set up",
};

let timer = 0;
let loading = null;

export function attentionChanged() {
  clearTimeout(timer);
  timer = setTimeout(attentionLoad, RELOAD_AFTER_MS);
}

export async function attentionLoad() {
  if (loading) return loading.then(() => attentionChanged());
  loading = api("/api/attention/")
    .then((data) => render(data.items || []))
    .catch(() => {}) // the count stays as it was; the next change or showing the tab reads it again
    .finally(() => (loading = null));
  return loading;
}

function render(items) {
  ui.attention.hidden = items.length === 0;
  if (!items.length) ui.attention.open = false;
  ui.attentionCount.textContent = items.length >= 100 ? "100+" : String(items.length);
  ui.attention.dataset.count = String(items.length);
  ui.attentionList.replaceChildren(...items.map(entry));
}

function entry(item) {
  const li = el("li", "attention-item");
  li.dataset.kind = item.kind;
  const link = el("a", "attention-link");
  link.href = item.path;
  link.append(
    el("span", "attention-kind", KINDS[item.kind] || "Needs you"),
    el("span", "attention-title", item.title),
    el("span", "attention-where", item.conversation_name),
  );
  link.addEventListener("click", (event) => {
    if (event.ctrlKey || event.metaKey || event.shiftKey || event.button !== 0) return;
    event.preventDefault();
    open(item);
  });
  li.append(link);
  return li;
}

/** Open the entry's card: its conversation, scrolled to the card and marked. */
function open(item) {
  ui.attention.open = false;
  closeSidebar();
  const hash = new URL(item.path, location.href).hash;
  history.pushState({ c: item.conversation_id }, "", item.path);
  if (state.view && state.view.id === item.conversation_id && state.view.loaded) {
    const target = hash && document.getElementById(hash.slice(1));
    if (target) {
      for (const old of document.querySelectorAll(".linked")) old.classList.remove("linked");
      target.classList.add("linked");
      target.scrollIntoView({ block: "start" });
    }
    return;
  }
  // The view reads the hash when its transcript is on screen (chat-view.js).
  select(item.conversation_id, { push: false });
}

ui.attention.addEventListener("keydown", (event) => {
  if (event.key === "Escape" && ui.attention.open) {
    event.preventDefault(); // this Escape is spent: it stops no answer
    ui.attention.open = false;
    ui.attention.querySelector("summary").focus();
  }
});
document.addEventListener("click", (event) => {
  if (ui.attention.open && !ui.attention.contains(event.target)) ui.attention.open = false;
});
document.addEventListener("visibilitychange", () => {
  if (document.visibilityState === "visible") attentionChanged();
});
