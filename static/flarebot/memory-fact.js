// One fact of the Memory section: a compact row (a checkbox, the text clamped to two lines with
// "Show all" when the clamp cuts it, when it was added or edited, Edit and Delete) with view,
// edit and confirm (delete) modes. The edit form and the delete question are made from their
// templates when opened and dropped when closed, so that 200 rows stay light. The section
// (memory.js) saves, deletes, filters and keeps the selection.
import { say } from "./api.js";
import { showCount } from "./dom.js";
import { fromTemplate } from "./section.js";

/** Text as the filter compares it: lower case, accents dropped ("Café" -> "cafe"). */
export function fold(text) {
  return text.normalize("NFKD").replace(/\p{M}/gu, "").toLocaleLowerCase();
}

/**
 * The item of `fact`; `section`: {templates: {item, edit, confirm}, maxLength, gate, save(item),
 * remove(item), selectionChanged(item)}.
 */
export function factItem(fact, section) {
  const { gate } = section;
  const { node, part } = fromTemplate(section.templates.item);
  const item = {
    fact,
    node,
    section,
    limit: section.maxLength,
    mode: "view", // view | edit | confirm
    expanded: false,
    folded: "",
    check: part("check"),
    text: part("text"),
    metaLine: part("meta-line"),
    meta: part("meta"),
    more: part("more"),
    actions: part("actions"),
    editButton: part("edit"),
    deleteButton: part("delete"),
    message: part("message"),
    // Made when the edit form or the delete question opens (openForm, openConfirm).
    form: null,
    confirm: null,
  };
  node.dataset.id = fact.id;
  item.text.id = `memory-text-${fact.id}`;
  item.check.setAttribute("aria-labelledby", item.text.id);

  // A press while another operation runs changes nothing, the checkbox included.
  item.check.addEventListener("click", (event) => {
    if (gate.busy) event.preventDefault();
  });
  item.check.addEventListener("change", () => section.selectionChanged(item));
  item.more.addEventListener("click", () => {
    item.expanded = !item.expanded;
    item.node.toggleAttribute("data-expanded", item.expanded);
    item.more.textContent = item.expanded ? "Show less" : "Show all";
    item.more.setAttribute("aria-expanded", String(item.expanded));
  });
  item.editButton.addEventListener("click", () => {
    if (gate.busy) return;
    say(item.message, "");
    setMode(item, "edit");
    item.draft.value = item.fact.content;
    showCount(item.counter, item.draft.value, item.limit);
    item.draft.focus();
  });
  item.deleteButton.addEventListener("click", () => {
    if (gate.busy) return;
    say(item.message, "");
    setMode(item, "confirm");
    item.keepButton.focus();
  });
  showFact(item, fact);
  return item;
}

function openForm(item) {
  const { section } = item;
  const { node, part } = fromTemplate(section.templates.edit);
  Object.assign(item, {
    form: node,
    draft: part("draft"),
    counter: part("counter"),
    conflict: part("conflict"),
    current: part("current"),
    saveButton: part("save"),
    cancelButton: part("cancel"),
  });
  const draftId = `memory-draft-${item.fact.id}`;
  item.draft.id = draftId;
  part("draft-label").htmlFor = draftId;
  item.cancelButton.addEventListener("click", () => {
    if (section.gate.busy) return;
    closeEdit(item);
  });
  node.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && !section.gate.busy) {
      event.preventDefault();
      closeEdit(item);
    }
  });
  item.draft.addEventListener("input", () => showCount(item.counter, item.draft.value, item.limit));
  node.addEventListener("submit", (event) => {
    event.preventDefault();
    section.gate.run(() => section.save(item));
  });
  item.message.before(node);
}

function openConfirm(item) {
  const { section } = item;
  const { node, part } = fromTemplate(section.templates.confirm);
  Object.assign(item, { confirm: node, confirmButton: part("confirm-delete"), keepButton: part("keep") });
  const keep = () => {
    setMode(item, "view");
    item.deleteButton.focus();
  };
  item.keepButton.addEventListener("click", () => {
    if (!section.gate.busy) keep();
  });
  node.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && !section.gate.busy) {
      event.preventDefault();
      keep();
    }
  });
  item.confirmButton.addEventListener("click", () => section.gate.run(() => section.remove(item)));
  item.message.before(node);
}

export function setMode(item, mode) {
  if (mode !== "edit" && item.form) {
    item.form.remove();
    item.form = null;
  }
  if (mode !== "confirm" && item.confirm) {
    item.confirm.remove();
    item.confirm = null;
  }
  if (mode === "edit" && !item.form) openForm(item);
  if (mode === "confirm" && !item.confirm) openConfirm(item);
  item.mode = mode;
  item.text.hidden = mode === "edit";
  item.metaLine.hidden = mode === "edit";
  item.actions.hidden = mode !== "view";
  item.node.dataset.mode = mode;
}

function closeEdit(item) {
  say(item.message, "");
  setMode(item, "view");
  item.editButton.focus();
}

/** "Added 1/2/2025" (the full time on hover): short enough to share a line with the buttons at 375 px. */
function when(fact) {
  const time = document.createElement("time");
  const date = new Date(fact.updated_at);
  time.dateTime = fact.updated_at;
  time.textContent = date.toLocaleDateString();
  time.title = date.toLocaleString();
  return time;
}

export function showFact(item, fact) {
  item.fact = fact;
  item.folded = fold(fact.content);
  item.text.textContent = fact.content;
  item.meta.replaceChildren(fact.version > 1 ? "Edited " : "Added ", when(fact));
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

/**
 * Show "Show all" on the shown rows whose text the two-line clamp cuts. Every height is read
 * before anything is written, so the 200 rows cost one layout.
 */
export function markClamped(items) {
  const cut = items.map((item) => item.mode !== "edit" && item.text.scrollHeight > item.text.clientHeight + 1);
  items.forEach((item, index) => {
    const hidden = !(cut[index] || item.expanded);
    if (item.more.hidden !== hidden) item.more.hidden = hidden;
  });
}
