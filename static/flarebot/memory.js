// The Memory section of the settings page: list, add, edit and delete the facts Flarebot keeps.
// Facts come from /api/memories/ (PROTOCOL.md "Memory"); the limits come from the server as the
// section's data attributes. The page decides by an error's code, never by its message.
// One operation runs at a time (add, save, delete, reload); the others wait until it ends.
// A failed save keeps the owner's draft; a version conflict shows the current text beside it.
import { call as api, say } from "./api.js";

const LIST = "/api/memories/";
const numbers = new Intl.NumberFormat("en-US");
const format = (n) => numbers.format(n);


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
  const template = find("#memory-item");

  let facts = []; // as the server last said them, newest first
  const items = new Map(); // fact id -> item
  let loaded = false;
  let loadFailed = false;
  let busy = false;

  // ---- limits --------------------------------------------------------------------

  function showCounter(element, text) {
    // String length is in UTF-16 code units, the unit of the server's limit.
    const over = text.length - maxLength;
    element.textContent = `${format(text.length)} / ${format(maxLength)}` + (over > 0 ? ` (${format(over)} over)` : "");
    element.dataset.over = over > 0 ? "1" : "";
  }

  function showLimits() {
    const count = facts.length;
    const full = count >= maxFacts;
    countBadge.textContent = loaded ? `${format(count)} of ${format(maxFacts)} facts` : "…";
    countBadge.dataset.state = !loaded ? "unknown" : full ? "full" : count >= maxFacts * 0.9 ? "near" : "ok";
    fullNote.hidden = !(loaded && full);
    fullNote.textContent = full ? `Memory is full: ${format(maxFacts)} of ${format(maxFacts)} facts. Delete a fact to add another.` : "";
    addText.disabled = !loaded || full;
    addButton.disabled = !loaded || full;
    reloadButton.disabled = !loaded && !loadFailed;
    empty.hidden = !loaded || count > 0;
    showCounter(addCounter, addText.value);
  }

  // One operation at a time. Buttons stay focusable (a keyboard user keeps their place);
  // presses while another operation runs are ignored.
  async function exclusive(operation) {
    if (busy) return;
    busy = true;
    root.setAttribute("aria-busy", "true");
    try {
      await operation();
    } finally {
      busy = false;
      root.setAttribute("aria-busy", "false");
      showLimits();
    }
  }

  // ---- one fact ------------------------------------------------------------------

  function createItem(fact) {
    const node = template.content.firstElementChild.cloneNode(true);
    const part = (role) => node.querySelector(`[data-role="${role}"]`);
    const item = {
      fact,
      node,
      mode: "view", // view | edit | confirm
      view: part("view"),
      text: part("text"),
      meta: part("meta"),
      editButton: part("edit"),
      deleteButton: part("delete"),
      confirm: part("confirm"),
      confirmButton: part("confirm-delete"),
      keepButton: part("keep"),
      form: part("edit-form"),
      draft: part("draft"),
      counter: part("counter"),
      conflict: part("conflict"),
      current: part("current"),
      saveButton: part("save"),
      cancelButton: part("cancel"),
      message: part("message"),
    };
    const draftId = `memory-draft-${fact.id}`;
    item.draft.id = draftId;
    part("draft-label").htmlFor = draftId;
    item.confirm.setAttribute("aria-label", "Confirm deletion");
    node.dataset.id = fact.id;

    item.editButton.addEventListener("click", () => {
      if (busy) return;
      item.draft.value = item.fact.content;
      item.conflict.hidden = true;
      item.draft.removeAttribute("aria-invalid");
      say(item.message, "");
      setMode(item, "edit");
      item.draft.focus();
    });
    item.cancelButton.addEventListener("click", () => {
      if (busy) return;
      closeEdit(item);
    });
    item.form.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && !busy) {
        event.preventDefault();
        closeEdit(item);
      }
    });
    item.draft.addEventListener("input", () => showCounter(item.counter, item.draft.value));
    item.form.addEventListener("submit", (event) => {
      event.preventDefault();
      exclusive(() => save(item));
    });
    item.deleteButton.addEventListener("click", () => {
      if (busy) return;
      say(item.message, "");
      setMode(item, "confirm");
      item.keepButton.focus();
    });
    item.keepButton.addEventListener("click", () => {
      if (busy) return;
      setMode(item, "view");
      item.deleteButton.focus();
    });
    item.confirm.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && !busy) {
        event.preventDefault();
        setMode(item, "view");
        item.deleteButton.focus();
      }
    });
    item.confirmButton.addEventListener("click", () => exclusive(() => remove(item)));
    showFact(item, fact);
    return item;
  }

  function setMode(item, mode) {
    item.mode = mode;
    item.view.hidden = mode === "edit";
    item.form.hidden = mode !== "edit";
    item.confirm.hidden = mode !== "confirm";
    item.editButton.hidden = mode === "confirm";
    item.deleteButton.hidden = mode === "confirm";
    item.node.dataset.mode = mode;
    if (mode === "edit") showCounter(item.counter, item.draft.value);
  }

  function closeEdit(item) {
    item.conflict.hidden = true;
    say(item.message, "");
    setMode(item, "view");
    item.editButton.focus();
  }

  function showFact(item, fact) {
    item.fact = fact;
    item.text.textContent = fact.content;
    item.meta.replaceChildren();
    const time = document.createElement("time");
    time.dateTime = fact.updated_at;
    time.textContent = new Date(fact.updated_at).toLocaleString();
    item.meta.append(fact.version > 1 ? "Edited " : "Added ", time);
  }

  function replaceFact(fact) {
    facts = facts.map((f) => (f.id === fact.id ? fact : f));
  }

  // Put a draft whose fact no longer exists into the add box, so the owner keeps it.
  function orphanDraft(item) {
    const draft = item.draft.value;
    if (item.mode === "edit" && draft !== item.fact.content && draft.trim()) {
      addText.value = addText.value.trim() ? `${addText.value}\n${draft}` : draft;
      say(addMessage, "A fact you were editing was deleted elsewhere. Your text is in the box above: add it again if you still want it.", "error");
      return true;
    }
    return false;
  }

  // ---- the list ------------------------------------------------------------------

  // Bring the list in line with `facts`, moving no node that is already in its place (a
  // moved node would lose the keyboard focus) and keeping open drafts.
  function render() {
    const wanted = new Set(facts.map((f) => f.id));
    for (const [id, item] of items) {
      if (!wanted.has(id)) {
        orphanDraft(item);
        item.node.remove();
        items.delete(id);
      }
    }
    let at = list.firstElementChild;
    for (const fact of facts) {
      let item = items.get(fact.id);
      if (!item) {
        item = createItem(fact);
        items.set(fact.id, item);
      } else if (item.fact.version !== fact.version) {
        // Changed elsewhere: an open draft is kept beside the current text; a pending
        // delete confirmation is withdrawn, as it was given for the older text.
        if (item.mode === "edit") showConflict(item, fact);
        else showFact(item, fact);
        if (item.mode === "confirm") setMode(item, "view");
      }
      if (item.node === at) {
        at = at.nextElementSibling;
      } else {
        list.insertBefore(item.node, at);
      }
    }
  }

  function showConflict(item, current) {
    showFact(item, current);
    item.current.textContent = current.content;
    item.conflict.hidden = false;
  }

  function focusAfterRemoval(index) {
    const next = facts[index] || facts[index - 1];
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
      replaceFact(fact);
      showFact(item, fact);
      item.conflict.hidden = true;
      setMode(item, "view");
      say(item.message, "Saved.", "ok");
      item.editButton.focus();
    } catch (error) {
      if (error.code === "version_conflict" && error.details.current) {
        // The next Save is based on the current version: it replaces the text on purpose.
        replaceFact(error.details.current);
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
        replaceFact(error.details.current);
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
    showCounter(addCounter, addText.value);
    if (addMessage.dataset.kind === "ok") say(addMessage, "");
  });
  addForm.addEventListener("submit", (event) => {
    event.preventDefault();
    if (!addButton.disabled) exclusive(add);
  });
  reloadButton.addEventListener("click", () => exclusive(reload));
  window.addEventListener("beforeunload", (event) => {
    const editing = Array.from(items.values()).some((i) => i.mode === "edit" && i.draft.value !== i.fact.content);
    if (addText.value.trim() || editing) {
      event.preventDefault();
      event.returnValue = "";
    }
  });
  showLimits();

  return {
    // Load the facts; rejects (after saying so in the section) when they could not be read.
    async load() {
      busy = true;
      try {
        await load();
      } catch (error) {
        say(addMessage, `Memory could not be loaded: ${error.message}`, "error");
        loadFailed = true;
        throw error;
      } finally {
        busy = false;
        showLimits();
      }
    },
  };
}
