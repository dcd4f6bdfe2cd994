// The task form: a new task keeps its id across retries, so a lost reply cannot create two;
// a failed save keeps the form as the owner wrote it.
import { call as api, say } from "./api.js";
import { newId, showCount } from "./dom.js";
import { replaceRow } from "./section.js";
import { BROWSER_ZONE, instantOf, localInput, zones } from "./tasks-time.js";

/** Wire the form to `section` (tasks.js). */
export function taskForm(root, section) {
  const maxInstructions = Number(root.dataset.maxInstructions);
  const find = (selector) => root.querySelector(selector);
  const form = find("#task-form");
  const f = {
    heading: find("#task-form-heading"),
    conflict: find("#task-conflict"),
    conflictVersion: find("#task-conflict-version"),
    name: find("#task-name"),
    conversation: find("#task-conversation"),
    instructions: find("#task-instructions"),
    counter: find("#task-instructions-counter"),
    cronField: find("#task-cron-field"),
    cron: find("#task-cron"),
    atField: find("#task-at-field"),
    at: find("#task-at"),
    zone: find("#task-zone"),
    enabled: find("#task-enabled"),
    message: find("#task-form-message"),
    save: find("#task-save"),
    cancel: find("#task-cancel"),
  };
  f.name.maxLength = Number(root.dataset.maxName);
  let editing = null; // { mode: "create", id } | { mode: "edit", task, version }

  for (const zone of zones()) f.zone.append(new Option(zone, zone, false, zone === BROWSER_ZONE));

  function kind() {
    return form.querySelector("input[name=kind]:checked").value;
  }

  function showKind() {
    const once = kind() === "once";
    f.cronField.hidden = once;
    f.atField.hidden = !once;
  }

  function setKind(value) {
    form.querySelector(`input[name=kind][value=${value}]`).checked = true;
    showKind();
  }

  function countInstructions() {
    showCount(f.counter, f.instructions.value, maxInstructions);
  }

  async function fillConversations(selected) {
    const view = await api("GET", "/api/conversations/");
    f.conversation.replaceChildren();
    for (const c of view.conversations) f.conversation.append(new Option(c.name, c.id, false, c.id === selected));
    return view.conversations.length;
  }

  function show() {
    countInstructions();
    form.hidden = false;
    f.name.focus();
  }

  async function openCreate() {
    section.say("");
    const count = await fillConversations(null);
    editing = { mode: "create", id: newId() };
    f.heading.textContent = "New task";
    f.conflict.hidden = true;
    f.name.value = "";
    f.instructions.value = "";
    f.cron.value = "0 9 * * 1";
    f.at.value = "";
    f.zone.value = BROWSER_ZONE;
    f.enabled.checked = true;
    f.conversation.disabled = false;
    setKind("cron");
    say(f.message, count ? "" : "Create a conversation first: a task sends its instructions to one.", count ? "" : "error");
    show();
  }

  async function openEdit(task) {
    section.say("");
    await fillConversations(task.conversation_id);
    editing = { mode: "edit", task, version: task.version };
    f.heading.textContent = `Edit “${task.name}”`;
    f.conflict.hidden = true;
    f.name.value = task.name;
    f.instructions.value = task.instructions;
    f.conversation.disabled = true; // a task's conversation never changes
    if (!f.conversation.value) f.conversation.append(new Option("(this task's conversation)", task.conversation_id, true, true));
    if (task.schedule.kind === "cron") {
      f.cron.value = task.schedule.expression;
      f.zone.value = task.schedule.timezone;
      if (f.zone.value !== task.schedule.timezone) {
        f.zone.append(new Option(task.schedule.timezone, task.schedule.timezone, true, true));
      }
      f.at.value = "";
    } else {
      f.zone.value = BROWSER_ZONE;
      f.at.value = localInput(task.schedule.at, BROWSER_ZONE);
      f.cron.value = "";
    }
    f.enabled.checked = task.enabled;
    setKind(task.schedule.kind);
    say(f.message, "");
    show();
  }

  function closeForm() {
    editing = null;
    form.hidden = true;
    f.conflict.hidden = true;
    say(f.message, "");
  }

  function formSchedule() {
    if (kind() === "cron") return { kind: "cron", expression: f.cron.value, timezone: f.zone.value };
    const at = instantOf(f.at.value, f.zone.value);
    if (at === null) return null;
    // An unchanged one-off is sent back exactly as stored (a one-off that ran stays done).
    if (editing?.mode === "edit" && editing.task.schedule.kind === "once" && localInput(editing.task.schedule.at, f.zone.value) === f.at.value) {
      return { kind: "once", at: editing.task.schedule.at };
    }
    return { kind: "once", at };
  }

  async function save() {
    const schedule = formSchedule();
    if (schedule === null) {
      say(f.message, "Enter the date and time of the run.", "error");
      f.at.focus();
      return;
    }
    const fields = { name: f.name.value, instructions: f.instructions.value, schedule, enabled: f.enabled.checked };
    say(f.message, "Saving…");
    try {
      let task;
      if (editing.mode === "create") {
        task = await api("POST", section.list, { id: editing.id, conversation_id: f.conversation.value, ...fields });
        section.tasks = [task, ...section.tasks.filter((t) => t.id !== task.id)];
      } else {
        task = await api("PUT", `${section.list}${editing.task.id}/`, { expected_version: editing.version, ...fields });
        section.tasks = replaceRow(section.tasks, task);
      }
      section.render();
      closeForm();
      section.say(`Saved “${task.name}”.`, "ok");
      section.items.get(task.id)?.editButton.focus();
    } catch (error) {
      if (error.code === "version_conflict" && error.details.current) {
        // The next Save is based on the current version: it replaces that version on purpose.
        const current = error.details.current;
        editing.version = current.version;
        editing.task = current;
        section.replaced(current);
        f.conflictVersion.textContent = String(current.version);
        f.conflict.hidden = false;
        say(f.message, "Not saved: the task was changed elsewhere.", "error");
      } else if (error.code === "not_found" && editing.mode === "edit") {
        section.tasks = section.tasks.filter((t) => t.id !== editing.task.id);
        section.render();
        say(f.message, "This task was deleted elsewhere. Cancel, or create it again as a new task.", "error");
        editing = { mode: "create", id: newId() };
        f.conversation.disabled = false;
      } else {
        say(f.message, error.message, "error");
        if (error.code === "id_conflict" && editing.mode === "create") editing.id = newId();
        if (error.code === "task_limit") await section.load().catch(() => {});
      }
    }
  }

  form.addEventListener("change", (event) => {
    if (event.target.name === "kind") showKind();
  });
  f.instructions.addEventListener("input", countInstructions);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (editing) section.gate.run(save);
  });
  f.cancel.addEventListener("click", () => {
    if (!section.gate.busy) closeForm();
  });
  return { openCreate, openEdit };
}
