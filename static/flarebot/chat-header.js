// The chat page's header and first-use help: the model answers come from, switchable here
// (the same setting as /settings/, through the same API), the export of the shown
// conversation, and, for an owner who has not configured a model they can use yet, what to
// set up first, said before a first message would fail.

import { call } from "./api.js";
import { hooks, notify, state } from "./chat-shell.js";
import { announce } from "./chat-actions.js";
import { ask, offerUndo } from "./chat-ask.js";

const LABELS = { anthropic: "Anthropic", openai: "OpenAI", local: "Local" };
const NEEDS_KEY = new Set(["anthropic", "openai"]);
const $ = (id) => document.getElementById(id);
const select = $("model-switch");
const exportMenu = $("export");
const setup = $("setup");
const setupText = $("setup-text");

let catalog = null; // {provider: [model...]}
let settings = null; // GET /api/settings/model/

const keyOf = (provider, model) => JSON.stringify([provider, model]);

function usable(provider) {
  return !NEEDS_KEY.has(provider) || (settings.credentials[provider] === "configured" && !unreadable(provider));
}

/** A stored key that no longer opens (the server secret changed): the owner enters it again. */
function unreadable(provider) {
  return (settings.verification || {})[provider] === "unreadable";
}

function renderSwitch() {
  const { provider, model } = settings.configuration;
  const groups = [];
  for (const [name, models] of Object.entries(catalog)) {
    if (!models.length) continue;
    const group = document.createElement("optgroup");
    group.label = LABELS[name] || name;
    for (const each of models) {
      const text = usable(name) ? each : unreadable(name) ? `${each} (key unreadable)` : `${each} (no key yet)`;
      group.append(new Option(text, keyOf(name, each), false, name === provider && each === model));
    }
    groups.push(group);
  }
  select.replaceChildren(...groups);
  select.value = keyOf(provider, model);
  select.title = `Model: ${LABELS[provider] || provider} ${model}`;
  select.hidden = groups.length === 0;
}

/** Say what to configure first when the chosen model cannot answer yet. */
function renderSetup() {
  const { provider, model } = settings.configuration;
  let text = "";
  if (unreadable(provider)) {
    text = `The stored ${LABELS[provider]} key can no longer be read (the server secret or the installation changed); ` +
      "enter it again in Settings.";
  } else if (!usable(provider)) {
    const anyKey = [...NEEDS_KEY].some((name) => settings.credentials[name] === "configured");
    const local = (catalog.local || []).length > 0;
    text = anyKey || local
      ? `The chosen model, ${LABELS[provider]} ${model}, needs an ${LABELS[provider]} API key. ` +
        "Add it in Settings, or choose a model above whose key is set."
      : "Before the first message: Flarebot has no model it can use yet. " +
        "Add an Anthropic or OpenAI API key in Settings (or have the operator name a local model server).";
  }
  setupText.textContent = text;
  setup.hidden = !text;
}

function show(next) {
  settings = next;
  renderSwitch();
  renderSetup();
}

/** Load the catalog and the current choice; the header shows nothing until they are in. */
export async function loadModel() {
  try {
    const [catalogView, current] = await Promise.all([
      call("GET", "/api/settings/model/catalog/"),
      call("GET", "/api/settings/model/"),
    ]);
    catalog = catalogView.providers;
    show(current);
  } catch {
    select.hidden = true; // the composer still works; Settings has the same control
  }
}

select.addEventListener("change", async () => {
  const [provider, model] = JSON.parse(select.value);
  const before = settings;
  select.disabled = true;
  try {
    show(await call("PUT", "/api/settings/model/", { provider, model }));
    announce(`Model changed to ${LABELS[provider] || provider} ${model}.`);
    if (!usable(provider)) notify(`${LABELS[provider]} ${model} needs an ${LABELS[provider]} API key: add it in Settings.`);
  } catch (error) {
    show(before);
    notify(error.message);
  } finally {
    select.disabled = false;
  }
});

// Export: links to the API's downloads of the shown conversation. Clear history: asked in the
// page (chat-ask.js); the history is hidden at once and an Undo bar stays, like a deletion's.
// The clear is sent when the bar closes, or at once when another conversation is shown, a
// message is sent to this one, or the page is left; the server then stops what runs and
// removes the history, and every tab (this one too) starts over on `conversation.cleared`.
let shownId = null;
let pendingClear = null; // a clear that can still be undone: {id, offer}
hooks.selected = (id) => {
  if (pendingClear && pendingClear.id !== id) pendingClear.offer.now();
  shownId = id;
  exportMenu.open = false;
  exportMenu.hidden = !id;
  if (!id) return;
  $("export-md").href = `/api/conversations/${id}/export/?format=md`;
  $("export-json").href = `/api/conversations/${id}/export/?format=json`;
};
exportMenu.addEventListener("click", (event) => {
  if (event.target.closest("a")) exportMenu.open = false;
});

function viewOf(id) {
  return state.view && state.view.id === id ? state.view : null;
}

let clearing = null; // a clear sent and not answered yet: {id, sent}

function clearNow(id, { keepalive = false } = {}) {
  if (pendingClear && pendingClear.id === id) pendingClear = null;
  const sent = (async () => {
    try {
      // The server first waits for a running answer to stop (at most the tools' grace and 5 s).
      await call("POST", `/api/conversations/${id}/clear/`, undefined, { within: 60_000, keepalive });
      if (!keepalive) announce("History cleared.");
    } catch (error) {
      if (keepalive) return;
      viewOf(id)?.hideHistory(false); // nothing was cleared: the history shows again
      notify(error.message);
    }
  })();
  clearing = { id, sent };
  sent.finally(() => {
    if (clearing && clearing.sent === sent) clearing = null;
  });
}

/** Before a message goes to this conversation: send its clear still waiting for Undo, and let it finish. */
export async function clearBeforeSending(id) {
  if (pendingClear && pendingClear.id === id) pendingClear.offer.now();
  if (clearing && clearing.id === id) await clearing.sent;
}

$("clear-history").addEventListener("click", async () => {
  exportMenu.open = false;
  const id = shownId;
  if (!id) return;
  const name = $("conversation-title").textContent;
  const question =
    `Clear the history of “${name}”? Its messages, tool cards, browser tasks and search entries are ` +
    "removed (a running answer is stopped first); the conversation and its name stay.";
  if (!(await ask({ question, yes: "Clear history" })) || shownId !== id) return;
  viewOf(id)?.hideHistory(true);
  const offer = offerUndo({
    text: `Cleared the history of “${name}”.`,
    undo: () => {
      pendingClear = null;
      viewOf(id)?.hideHistory(false);
    },
    done: ({ keepalive }) => clearNow(id, { keepalive }),
  });
  pendingClear = { id, offer };
});
exportMenu.addEventListener("keydown", (event) => {
  if (event.key === "Escape" && exportMenu.open) {
    event.preventDefault(); // this Escape is spent: it stops no answer
    exportMenu.open = false;
    exportMenu.querySelector("summary").focus();
  }
});
document.addEventListener("click", (event) => {
  if (exportMenu.open && !exportMenu.contains(event.target)) exportMenu.open = false;
});
