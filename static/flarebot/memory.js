// The Memory section of the settings page: list, filter, add, edit and delete the facts Flarebot
// keeps, one at a time or many at once. Facts come from /api/memories/ (PROTOCOL.md "Memory"), the
// whole list at once (at most the limit), so the filter runs here over what was loaded; the
// limits come from the server as the section's data attributes. The page decides by an error's
// code, never by its message.
// One operation runs at a time (add, save, delete, delete selected, reload); the others wait.
// A failed save keeps the owner's draft; a version conflict shows the current text beside it.
// One message speaks for the section (#memory-add-message): the note that memory is full shows
// only when that message does not already say so. One fact is memory-fact.js.
import { call as api, say } from "./api.js";
import { numbers, showCount } from "./dom.js";
import { factItem, fold, markClamped, setMode, showConflict, showFact, unsaved } from "./memory-fact.js";
import { oneAtATime, reconcile, replaceRow, rowAfterRemoval, showCountBadge } from "./section.js";

const LIST = "/api/memories/";
const DELETE_MANY = "/api/memories/delete/";

/** "1 fact", "12 facts". */
const factsText = (count) => `${numbers.format(count)} ${count === 1 ? "fact" : "facts"}`;

export function memorySection(root = document.getElementById("memory")) {
  const maxFacts = Number(root.dataset.maxFacts);
  const maxLength = Number(root.dataset.maxLength);
  const find = (selector) => root.querySelector(selector);
  const countBadge = find("#memory-count");
  const addForm = find("#memory-add");
  const addText = find("#memory-new");
  const addCounter = find("#memory-new-counter");
  const addButton = find("#memory-add-button");
  const message = find("#memory-add-message");
  const fullNote = find("#memory-full");
  const reloadButton = find("#memory-reload");
  const empty = find("#memory-empty");
  const list = find("#memory-list");
  const tools = find("#memory-tools");
  const filterBox = find("#memory-filter");
  const shownNote = find("#memory-shown");
  const noMatch = find("#memory-no-match");
  const selectAll = find("#memory-select-all");
  const selectedNote = find("#memory-selected");
  const deleteSelected = find("#memory-delete-selected");
  const bulkConfirm = find("#memory-bulk-confirm");
  const bulkQuestion = find("#memory-bulk-question");
  const bulkDelete = find("#memory-bulk-delete");
  const bulkKeep = find("#memory-bulk-keep");

  let facts = []; // as the server last said them, newest first
  const items = new Map(); // fact id -> item
  const selected = new Set(); // fact ids; kept while a filter hides them
  let loaded = false;
  let loadFailed = false;
  let fullSaid = false; // the section's message says that memory is full
  const gate = oneAtATime(root, showLimits);
  const templates = { item: find("#memory-item"), edit: find("#memory-edit"), confirm: find("#memory-confirm") };
  const section = { templates, maxLength, gate, save, remove, selectionChanged };

  /** Say something for the whole section; `full`: it says that memory is full. */
  function tell(text, kind, { full = false } = {}) {
    say(message, text, kind);
    fullSaid = full;
    showLimits();
  }

  function showLimits() {
    const count = facts.length;
    const full = count >= maxFacts;
    showCountBadge(countBadge, { loaded, count, max: maxFacts, noun: "facts" });
    const max = numbers.format(maxFacts);
    fullNote.textContent = full ? `Memory is full: ${max} of ${max} facts. Delete a fact to add another.` : "";
    fullNote.hidden = !(loaded && full) || fullSaid;
    addText.disabled = !loaded || full;
    addButton.disabled = !loaded || full;
    reloadButton.disabled = !loaded && !loadFailed;
    empty.hidden = !loaded || count > 0;
    tools.hidden = !loaded || count === 0;
    showCount(addCounter, addText.value, maxLength);
    showSelection();
  }

  // Put a draft whose fact no longer exists into the add box, so the owner keeps it.
  function orphanDraft(item) {
    if (unsaved(item) && item.draft.value.trim()) {
      const draft = item.draft.value;
      addText.value = addText.value.trim() ? `${addText.value}\n${draft}` : draft;
      tell("A fact you were editing was deleted elsewhere. Your text is in the box above: add it again if you still want it.", "error");
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

  function create(fact) {
    const item = factItem(fact, section);
    item.check.checked = selected.has(fact.id);
    return item;
  }

  function render() {
    reconcile(list, items, facts, { create, update: changedElsewhere, dropped: orphanDraft });
    for (const id of selected) {
      if (items.has(id)) continue;
      selected.delete(id);
      closeBulk();
    }
    applyFilter();
  }

  // ---- filter and selection ------------------------------------------------------

  // The items in list order (while reconcile runs, a new fact may have none yet).
  const listed = () => facts.map((fact) => items.get(fact.id)).filter(Boolean);
  const shownItems = () => listed().filter((item) => !item.node.hidden);

  // Every word typed must occur in the fact. A fact being edited or deleted stays shown, and so
  // does the one holding the focus (just saved, say) until the filter changes.
  function applyFilter() {
    const words = fold(filterBox.value).split(/\s+/).filter(Boolean);
    const focused = document.activeElement;
    let shown = 0;
    for (const item of listed()) {
      const show = item.mode !== "view" || item.node.contains(focused) || words.every((word) => item.folded.includes(word));
      if (item.node.hidden === show) item.node.hidden = !show;
      if (show) shown += 1;
    }
    const filtering = words.length > 0;
    shownNote.textContent = filtering ? `${numbers.format(shown)} of ${factsText(facts.length)}` : "";
    noMatch.hidden = !(filtering && shown === 0 && facts.length > 0);
    noMatch.textContent = noMatch.hidden ? "" : `No fact matches “${filterBox.value.trim()}”. Press Escape to clear the filter.`;
    showSelection();
    measureSoon();
  }

  function showSelection() {
    const shown = shownItems();
    const shownSelected = shown.filter((item) => selected.has(item.fact.id)).length;
    const count = selected.size;
    const notShown = count - shownSelected;
    selectAll.checked = shown.length > 0 && shownSelected === shown.length;
    selectAll.indeterminate = shownSelected > 0 && shownSelected < shown.length;
    selectAll.disabled = shown.length === 0;
    selectedNote.textContent =
      count === 0 ? "None selected" : `${numbers.format(count)} selected` + (notShown ? ` (${numbers.format(notShown)} not shown)` : "");
    deleteSelected.disabled = count === 0;
    deleteSelected.textContent = count === 0 ? "Delete selected" : `Delete ${factsText(count)}`;
    for (const item of items.values()) {
      const checked = selected.has(item.fact.id);
      if (item.check.checked !== checked) item.check.checked = checked;
    }
  }

  // A selection that changes withdraws a pending confirmation: it was given for other facts.
  function closeBulk() {
    bulkConfirm.hidden = true;
    deleteSelected.hidden = false;
  }

  function selectionChanged(item) {
    if (item.check.checked) selected.add(item.fact.id);
    else selected.delete(item.fact.id);
    closeBulk();
    showSelection();
  }

  // "Show all" only where the clamp cuts a text: measured once a frame, after what changed it.
  let measuring = 0;
  function measureSoon() {
    if (measuring) return;
    measuring = requestAnimationFrame(() => {
      measuring = 0;
      markClamped(shownItems());
    });
  }
  let listWidth = 0;
  new ResizeObserver(([entry]) => {
    if (entry.contentRect.width === listWidth) return;
    listWidth = entry.contentRect.width;
    measureSoon();
  }).observe(list);

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
    tell("Adding…");
    try {
      const fact = await api("POST", LIST, { content });
      facts = [fact, ...facts.filter((f) => f.id !== fact.id)];
      render();
      if (addText.value === content) addText.value = "";
      const max = numbers.format(maxFacts);
      if (facts.length >= maxFacts) tell(`Added. Memory is now full (${max} of ${max}): delete a fact to add another.`, "ok", { full: true });
      else tell("Added.", "ok");
    } catch (error) {
      addText.setAttribute("aria-invalid", "true");
      tell(error.message, "error", { full: error.code === "memory_full" });
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
      setMode(item, "view");
      say(item.message, "Saved.", "ok");
      applyFilter();
      item.editButton.focus();
    } catch (error) {
      if (error.code === "version_conflict" && error.details.current) {
        // The next Save is based on the current version: it replaces the text on purpose.
        facts = replaceRow(facts, error.details.current);
        showConflict(item, error.details.current);
        say(item.message, `Not saved: the fact is now at version ${error.details.current.version}.`, "error");
      } else if (error.code === "not_found") {
        // Deleted elsewhere: the draft moves to the add box (orphanDraft), never lost.
        const index = shownItems().indexOf(item);
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

  // Where the focus goes when nothing of the list is left to hold it.
  const outsideList = () => (!selectAll.disabled ? selectAll : !tools.hidden ? filterBox : addText.disabled ? reloadButton : addText);

  /** Once the shown row at `index` is gone: the row now there, or the one before. */
  function focusAfterRemoval(index) {
    const next = rowAfterRemoval(shownItems(), index);
    (next ? next.editButton : outsideList()).focus();
  }

  async function remove(item) {
    const index = shownItems().indexOf(item);
    say(item.message, "Deleting…");
    try {
      await api("DELETE", `${LIST}${item.fact.id}/?version=${item.fact.version}`);
      facts = facts.filter((f) => f.id !== item.fact.id);
      render();
      tell("Fact deleted. It no longer reaches the model.", "ok");
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
      applyFilter();
      item.deleteButton.focus();
    }
  }

  // Every selected fact at the version shown, in one call: a fact changed meanwhile stays,
  // with its new text, still selected; the others go.
  async function removeSelected() {
    const chosen = facts.filter((fact) => selected.has(fact.id));
    tell(`Deleting ${factsText(chosen.length)}…`);
    try {
      const { results } = await api("POST", DELETE_MANY, { items: chosen.map(({ id, version }) => ({ id, version })) });
      const stale = results.filter((result) => result.outcome === "version_conflict" && result.current);
      const gone = new Set(results.filter((result) => !stale.includes(result)).map((result) => result.id));
      facts = facts.filter((fact) => !gone.has(fact.id));
      for (const { current } of stale) facts = replaceRow(facts, current);
      render();
      for (const { current } of stale) {
        say(items.get(current.id).message, "Not deleted: this fact was changed elsewhere; its current text is shown. Delete it again if you still want to.", "error");
      }
      const deleted = factsText(gone.size);
      if (!stale.length) tell(`${deleted} deleted. ${gone.size === 1 ? "It no longer reaches" : "They no longer reach"} the model.`, "ok");
      else tell(`${deleted} deleted. Not deleted: ${factsText(stale.length)} changed elsewhere, shown with the current text and still selected.`, "error");
    } catch (error) {
      tell(`Nothing was deleted: ${error.message}`, "error");
    }
    closeBulk();
    showLimits();
    outsideList().focus();
  }

  async function reload() {
    tell("Reloading…");
    try {
      await load();
      tell("");
    } catch (error) {
      tell(`Memory could not be reloaded: ${error.message}`, "error");
    }
  }

  // ---- wiring ----------------------------------------------------------------------

  addText.addEventListener("input", () => {
    showCount(addCounter, addText.value, maxLength);
    if (message.dataset.kind === "ok") tell("");
  });
  addForm.addEventListener("submit", (event) => {
    event.preventDefault();
    if (!addButton.disabled) gate.run(add);
  });
  reloadButton.addEventListener("click", () => gate.run(reload));

  // A pending question about the selection is withdrawn: it said what the old filter showed.
  const filterChanged = () => {
    closeBulk();
    applyFilter();
  };
  filterBox.addEventListener("input", filterChanged);
  filterBox.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && filterBox.value) {
      event.preventDefault();
      filterBox.value = "";
      filterChanged();
    }
  });
  selectAll.addEventListener("click", (event) => {
    if (gate.busy) event.preventDefault();
  });
  selectAll.addEventListener("change", () => {
    const shown = shownItems();
    const all = shown.every((item) => selected.has(item.fact.id));
    for (const item of shown) {
      if (all) selected.delete(item.fact.id);
      else selected.add(item.fact.id);
    }
    closeBulk();
    showSelection();
  });
  deleteSelected.addEventListener("click", () => {
    if (gate.busy || !selected.size) return;
    const count = selected.size;
    const notShown = count - shownItems().filter((item) => selected.has(item.fact.id)).length;
    bulkQuestion.textContent =
      `Delete ${factsText(count)}? ${count === 1 ? "It" : "They"} will no longer reach the model; older transcripts may still quote ${count === 1 ? "it" : "them"}.` +
      (notShown ? ` ${numbers.format(notShown)} of them ${notShown === 1 ? "is" : "are"} not shown by the filter.` : "");
    bulkDelete.textContent = `Delete ${factsText(count)}`;
    deleteSelected.hidden = true;
    bulkConfirm.hidden = false;
    bulkKeep.focus();
  });
  const keepSelected = () => {
    closeBulk();
    deleteSelected.focus();
  };
  bulkKeep.addEventListener("click", () => {
    if (!gate.busy) keepSelected();
  });
  bulkConfirm.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && !gate.busy) {
      event.preventDefault();
      keepSelected();
    }
  });
  bulkDelete.addEventListener("click", () => gate.run(removeSelected));

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
        tell(`Memory could not be loaded: ${error.message}`, "error");
        loadFailed = true;
      }),
  };
}
