// One fact of the Memory section: view, edit (a draft and its counter) and delete (after a
// confirmation) modes. The section (memory.js) saves and deletes.
import { say } from "./api.js";
import { localTime, showCount } from "./dom.js";
import { fromTemplate } from "./section.js";

/** The item of `fact`; `section`: {template, maxLength, gate, save(item), remove(item)}. */
export function factItem(fact, section) {
  const { gate } = section;
  const { node, part } = fromTemplate(section.template);
  const item = {
    fact,
    node,
    limit: section.maxLength,
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
    if (gate.busy) return;
    item.draft.value = item.fact.content;
    item.conflict.hidden = true;
    item.draft.removeAttribute("aria-invalid");
    say(item.message, "");
    setMode(item, "edit");
    item.draft.focus();
  });
  item.cancelButton.addEventListener("click", () => {
    if (gate.busy) return;
    closeEdit(item);
  });
  item.form.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && !gate.busy) {
      event.preventDefault();
      closeEdit(item);
    }
  });
  item.draft.addEventListener("input", () => showCount(item.counter, item.draft.value, item.limit));
  item.form.addEventListener("submit", (event) => {
    event.preventDefault();
    gate.run(() => section.save(item));
  });
  item.deleteButton.addEventListener("click", () => {
    if (gate.busy) return;
    say(item.message, "");
    setMode(item, "confirm");
    item.keepButton.focus();
  });
  item.keepButton.addEventListener("click", () => {
    if (gate.busy) return;
    setMode(item, "view");
    item.deleteButton.focus();
  });
  item.confirm.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && !gate.busy) {
      event.preventDefault();
      setMode(item, "view");
      item.deleteButton.focus();
    }
  });
  item.confirmButton.addEventListener("click", () => gate.run(() => section.remove(item)));
  showFact(item, fact);
  return item;
}

export function setMode(item, mode) {
  item.mode = mode;
  item.view.hidden = mode === "edit";
  item.form.hidden = mode !== "edit";
  item.confirm.hidden = mode !== "confirm";
  item.editButton.hidden = mode === "confirm";
  item.deleteButton.hidden = mode === "confirm";
  item.node.dataset.mode = mode;
  if (mode === "edit") showCount(item.counter, item.draft.value, item.limit);
}

function closeEdit(item) {
  item.conflict.hidden = true;
  say(item.message, "");
  setMode(item, "view");
  item.editButton.focus();
}

export function showFact(item, fact) {
  item.fact = fact;
  item.text.textContent = fact.content;
  item.meta.replaceChildren(fact.version > 1 ? "Edited " : "Added ", localTime(fact.updated_at));
}

/** Changed elsewhere while its draft is open: show the current text beside it. */
export function showConflict(item, current) {
  showFact(item, current);
  item.current.textContent = current.content;
  item.conflict.hidden = false;
}

/** Whether the item holds a draft the owner has not saved. */
export function unsaved(item) {
  return item.mode === "edit" && item.draft.value !== item.fact.content;
}
