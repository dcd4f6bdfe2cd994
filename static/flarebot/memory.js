// The Memory section of the settings page: list, add, edit and delete the facts Flarebot keeps.
// Facts come from /api/memories/ (PROTOCOL.md "Memory"); the limits come from the server as the
// section's data attributes. The page decides by an error's code, never by its message.
// One operation runs at a time (add, save, delete, reload); the others wait until it ends.
// A failed save keeps the owner's draft; a version conflict shows the current text beside it.
// One fact is memory-fact.js.
import { call as api, say } from "./api.js";
import { numbers, showCount } from "./dom.js";
import { factItem, setMode, showConflict, showFact, unsaved } from "./memory-fact.js";
import { oneAtATime, reconcile, replaceRow, rowAfterRemoval, showCountBadge } from "./section.js";

const LIST = "/api/memories/";

export function memorySection(root = document.getElementById("memory")) {
  const maxFacts = Number(root.dataset.maxFacts);
  const maxLength = Number(root.dataset.maxLength);
  const find = (selector) => root.querySelector(selector);
  const countBadge = find("#memory-count");
  const addForm = find("#memory-add");
  const addText = find("#memory-new");
  const addCounter = find("#memory-new-counter");
  const addButton = find("#memory-add-button");
  const addMessage = find("#memory-add-message");
  const fullNote = find("#memory-full");
  const reloadButton = find("#memory-reload");
  const empty = find("#memory-empty");
  const list = find("#memory-list");

  let facts = []; // as the server last said them, newest first
  const items = new Map(); // fact id -> item
  let loaded = false;
  let loadFailed = false;
  const gate = oneAtATime(root, showLimits);
  const section = { template: find("#memory-item"), maxLength, gate, save, remove };

  function showLimits() {
    const count = facts.length;
    const full = count >= maxFacts;
    showCountBadge(countBadge, { loaded, count, max: maxFacts, noun: "facts" });
    fullNote.hidden = !(loaded && full);
    const max = numbers.format(maxFacts);
    fullNote.textContent = full ? `Memory is full: ${max} of ${max} facts. Delete a fact to add another.` : "";
    addText.disabled = !loaded || full;
    addButton.disabled = !loaded || full;
    reloadButton.disabled = !loaded && !loadFailed;
    empty.hidden = !loaded || count > 0;
    showCount(addCounter, addText.value, maxLength);
  }

  // Put a draft whose fact no longer exists into the add box, so the owner keeps it.
  function orphanDraft(item) {
    const draft = item.draft.value;
    if (unsaved(item) && draft.trim()) {
      addText.value = addText.value.trim() ? `${addText.value}\n${draft}` : draft;
      say(addMessage, "A fact you were editing was deleted elsewhere. Your text is in the box above: add it again if you still want it.", "error");
    }
  }

  // Changed elsewhere: an open draft is kept beside the current text; a pending delete
  // confirmation is withdrawn, as it was given for the older text.
  function changedElsewhere(item, fact) {
    if (item.fact.version === fact.version) return;
    if (item.mode === "edit") showConflict(item, fact);
    else showFact(item, fact);
    if (item.mode === "confirm") setMode(item, "view");
  }

  function render() {
    reconcile(list, items, facts, { create: (fact) => factItem(fact, section), update: changedElsewhere, dropped: orphanDraft });
  }

  function focusAfterRemoval(index) {
    const next = rowAfterRemoval(facts, index);
    const target = next ? items.get(next.id)?.editButton : addText.disabled ? reloadButton : addText;
    target?.focus();
  }

  async function load() {
    const view = await api("GET", LIST);
    facts = view.memories;
    loaded = true;
    render();
    showLimits();
  }

  // ---- operations ----------------------------------------------------------------

  async function add() {
    const content = addText.value;
    addText.removeAttribute("aria-invalid");
    say(addMessage, "Adding…");
    try {
      const fact = await api("POST", LIST, { content });
      facts = [fact, ...facts.filter((f) => f.id !== fact.id)];
      render();
      if (addText.value === content) addText.value = "";
      say(addMessage, "Added.", "ok");
    } catch (error) {
      addText.setAttribute("aria-invalid", "true");
      say(addMessage, error.message, "error");
      if (error.code === "memory_full") await load().catch(() => {});
    }
    showLimits();
    if (!addText.disabled) addText.focus();
  }

  async function save(item) {
    const content = item.draft.value;
    item.draft.removeAttribute("aria-invalid");
    say(item.message, "Saving…");
    try {
      const fact = await api("PATCH", `${LIST}${item.fact.id}/`, { content, version: item.fact.version });
      facts = replaceRow(facts, fact);
      showFact(item, fact);
      item.conflict.hidden = true;
      setMode(item, "view");
      say(item.message, "Saved.", "ok");
      item.editButton.focus();
    } catch (error) {
      if (error.code === "version_conflict" && error.details.current) {
        // The next Save is based on the current version: it replaces the text on purpose.
        facts = replaceRow(facts, error.details.current);
        showConflict(item, error.details.current);
        say(item.message, `Not saved: the fact is now at version ${error.details.current.version}.`, "error");
      } else if (error.code === "not_found") {
        // Deleted elsewhere: the draft moves to the add box (orphanDraft), never lost.
        const index = facts.findIndex((f) => f.id === item.fact.id);
        facts = facts.filter((f) => f.id !== item.fact.id);
        render();
        if (addText.value && !addText.disabled) addText.focus();
        else focusAfterRemoval(index);
      } else {
        if (error.code === "invalid_fact" || error.code === "fact_too_long") item.draft.setAttribute("aria-invalid", "true");
        say(item.message, error.message, "error");
      }
    }
  }

  async function remove(item) {
    const index = facts.findIndex((f) => f.id === item.fact.id);
    say(item.message, "Deleting…");
    try {
      await api("DELETE", `${LIST}${item.fact.id}/?version=${item.fact.version}`);
      facts = facts.filter((f) => f.id !== item.fact.id);
      render();
      say(addMessage, "Fact deleted. It no longer reaches the model.", "ok");
      focusAfterRemoval(index);
    } catch (error) {
      setMode(item, "view");
      if (error.code === "version_conflict" && error.details.current) {
        facts = replaceRow(facts, error.details.current);
        showFact(item, error.details.current);
        say(item.message, "Not deleted: this fact was changed elsewhere; its current text is shown. Delete it again if you still want to.", "error");
      } else {
        say(item.message, error.message, "error");
      }
      item.deleteButton.focus();
    }
  }

  async function reload() {
    say(addMessage, "Reloading…");
    try {
      await load();
      say(addMessage, "");
    } catch (error) {
      say(addMessage, `Memory could not be reloaded: ${error.message}`, "error");
    }
  }

  addText.addEventListener("input", () => {
    showCount(addCounter, addText.value, maxLength);
    if (addMessage.dataset.kind === "ok") say(addMessage, "");
  });
  addForm.addEventListener("submit", (event) => {
    event.preventDefault();
    if (!addButton.disabled) gate.run(add);
  });
  reloadButton.addEventListener("click", () => gate.run(reload));
  window.addEventListener("beforeunload", (event) => {
    if (addText.value.trim() || Array.from(items.values()).some(unsaved)) {
      event.preventDefault();
      event.returnValue = "";
    }
  });
  showLimits();

  return {
    // Load the facts; rejects (after saying so in the section) when they could not be read.
    load: () =>
      gate.first(load, (error) => {
        say(addMessage, `Memory could not be loaded: ${error.message}`, "error");
        loadFailed = true;
      }),
  };
}
