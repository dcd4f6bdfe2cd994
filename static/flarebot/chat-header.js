// The chat page's header and first-use help: the model answers come from, switchable here
// (the same setting as /settings/, through the same API), the export of the shown
// conversation, and, for an owner who has not configured a model they can use yet, what to
// set up first, said before a first message would fail.

import { call } from "./api.js";
import { hooks, notify } from "./chat-shell.js";
import { announce } from "./chat-actions.js";

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

// Export: links to the API's downloads of the shown conversation. Clear history: after a
// confirmation, the server stops what runs and removes the history; every tab (this one
// too) starts over when the `conversation.cleared` event arrives.
let shownId = null;
hooks.selected = (id) => {
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
$("clear-history").addEventListener("click", async () => {
  exportMenu.open = false;
  const id = shownId;
  const name = $("conversation-title").textContent;
  const question =
    `Clear the history of “${name}”? Its messages, tool cards, browser tasks and search entries are ` +
    "removed (a running answer is stopped first); the conversation and its name stay. This cannot be undone.";
  if (!id || !confirm(question)) return;
  try {
    // The server first waits for a running answer to stop (at most the tools' grace and 5 s).
    await call("POST", `/api/conversations/${id}/clear/`, undefined, { within: 60_000 });
    announce("History cleared.");
  } catch (error) {
    notify(error.message);
  }
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
