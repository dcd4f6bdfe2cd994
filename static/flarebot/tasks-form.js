// The task form: a new task keeps its id across retries, so a lost reply cannot create two;
// a failed save keeps the form as the owner wrote it. A new task goes to a new conversation
// named after it unless the owner picks one (the server creates both together). The schedule
// is a preset (tasks-presets.js), a cron expression or a one-off; a one-off is edited in its
// own zone, with the browser's time beside it when the zones differ.
import { call as api, say } from "./api.js";
import { el, newId, showCount } from "./dom.js";
import { replaceRow } from "./section.js";
import { DAYS, HOURS, PRESETS, presetCron, presetOf } from "./tasks-presets.js";
import { BROWSER_ZONE, instantOf, localInput, yourTime, zones } from "./tasks-time.js";

const NEW_CONVERSATION = "new";
// The field a refusal is about (the error's `fields`) and the input to show it on.
const FIELD_INPUTS = {
  name: "name",
  instructions: "instructions",
  "schedule.expression": "cron",
  "schedule.at": "at",
  "schedule.timezone": "zone",
  conversation_id: "conversation",
};

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
    conversationHint: find("#task-conversation-hint"),
    instructions: find("#task-instructions"),
    counter: find("#task-instructions-counter"),
    repeat: find("#task-repeat"),
    dayField: find("#task-day-field"),
    day: find("#task-day"),
    timeField: find("#task-time-field"),
    time: find("#task-time"),
    hoursField: find("#task-hours-field"),
    hours: find("#task-hours"),
    cronField: find("#task-cron-field"),
    cron: find("#task-cron"),
    cronHint: find("#task-cron-hint"),
    presetCron: find("#task-preset-cron"),
    atField: find("#task-at-field"),
    at: find("#task-at"),
    atLocal: find("#task-at-local"),
    zone: find("#task-zone"),
    enabled: find("#task-enabled"),
    notify: find("#task-notify"),
    message: find("#task-form-message"),
    save: find("#task-save"),
    cancel: find("#task-cancel"),
  };
  f.name.maxLength = Number(root.dataset.maxName);
  f.cron.maxLength = Number(root.dataset.maxCron);
  let editing = null; // { mode: "create", id } | { mode: "edit", task, version }
  let repeatShown = f.repeat.value;

  for (const zone of zones()) f.zone.append(new Option(zone, zone, false, zone === BROWSER_ZONE));
  for (const [number, name] of DAYS) f.day.append(new Option(name, String(number)));
  for (const hours of HOURS) f.hours.append(new Option(hours === 1 ? "1 hour" : `${hours} hours`, String(hours)));

  function presetFields() {
    return { preset: f.repeat.value, time: f.time.value, day: Number(f.day.value), hours: Number(f.hours.value) };
  }

  // Show the inputs of the chosen schedule, and what a preset will save.
  function showRepeat() {
    const repeat = f.repeat.value;
    f.dayField.hidden = repeat !== "weekly";
    f.timeField.hidden = !["daily", "weekdays", "weekly"].includes(repeat);
    f.hoursField.hidden = repeat !== "hours";
    f.cronField.hidden = f.cronHint.hidden = repeat !== "cron";
    f.atField.hidden = repeat !== "once";
    const cron = PRESETS.includes(repeat) ? presetCron(presetFields()) : null;
    f.presetCron.hidden = cron === null;
    f.presetCron.replaceChildren(...(cron === null ? [] : ["Saved as the cron expression ", el("code", "", cron), "."]));
    showYourTime();
  }

  function showYourTime() {
    const at = f.repeat.value === "once" ? instantOf(f.at.value, f.zone.value) : null;
    const beside = at === null ? null : yourTime(at, f.zone.value);
    f.atLocal.hidden = beside === null;
    f.atLocal.replaceChildren(...(beside ? [beside] : []));
  }

  function setRepeat(value) {
    // Custom starts from the preset it leaves, so the owner edits what they had.
    if (value === "cron" && PRESETS.includes(repeatShown)) {
      f.cron.value = presetCron({ ...presetFields(), preset: repeatShown }) || f.cron.value;
    }
    f.repeat.value = value;
    repeatShown = value;
    showRepeat();
  }

  function setZone(zone) {
    f.zone.value = zone;
    if (f.zone.value !== zone) f.zone.append(new Option(zone, zone, true, true));
  }

  function countInstructions() {
    showCount(f.counter, f.instructions.value, maxInstructions);
  }

  async function fillConversations(selected, { offerNew }) {
    const view = await api("GET", "/api/conversations/");
    f.conversation.replaceChildren();
    if (offerNew) f.conversation.append(new Option("A new conversation", NEW_CONVERSATION, true, true));
    for (const c of view.conversations) f.conversation.append(new Option(c.name, c.id, false, c.id === selected));
    showConversationHint();
  }

  function showConversationHint() {
    f.conversationHint.hidden = f.conversation.value !== NEW_CONVERSATION;
  }

  function clearInvalid() {
    for (const input of Object.values(FIELD_INPUTS)) f[input].removeAttribute("aria-invalid");
  }

  function show() {
    countInstructions();
    clearInvalid();
    form.hidden = false;
    f.name.focus();
  }

  async function openCreate() {
    section.say("");
    await fillConversations(null, { offerNew: true });
    editing = { mode: "create", id: newId() };
    f.heading.textContent = "New task";
    f.conflict.hidden = true;
    f.name.value = "";
    f.instructions.value = "";
    f.time.value = "09:00";
    f.day.value = "1";
    f.hours.value = "6";
    f.cron.value = "0 9 * * 1";
    f.at.value = "";
    setZone(BROWSER_ZONE);
    f.enabled.checked = true;
    f.notify.checked = false;
    f.conversation.disabled = false;
    setRepeat("daily");
    say(f.message, "");
    show();
  }

  async function openEdit(task) {
    section.say("");
    await fillConversations(task.conversation_id, { offerNew: false });
    editing = { mode: "edit", task, version: task.version };
    f.heading.textContent = `Edit “${task.name}”`;
    f.conflict.hidden = true;
    f.name.value = task.name;
    f.instructions.value = task.instructions;
    f.conversation.disabled = true; // a task's conversation never changes
    if (!f.conversation.value) f.conversation.append(new Option("(this task's conversation)", task.conversation_id, true, true));
    setZone(task.schedule.timezone || "UTC");
    f.time.value = "09:00";
    f.day.value = "1";
    f.hours.value = "6";
    if (task.schedule.kind === "cron") {
      const preset = presetOf(task.schedule.expression);
      f.cron.value = task.schedule.expression;
      f.at.value = "";
      if (preset) {
        if (preset.time) f.time.value = preset.time;
        if (preset.day !== undefined) f.day.value = String(preset.day);
        if (preset.hours) f.hours.value = String(preset.hours);
      }
      setRepeat(preset ? preset.preset : "cron");
    } else {
      f.at.value = localInput(task.schedule.at, f.zone.value);
      f.cron.value = "";
      setRepeat("once");
    }
    f.enabled.checked = task.enabled;
    f.notify.checked = Boolean(task.notify_on_completion);
    say(f.message, "");
    show();
  }

  function closeForm() {
    editing = null;
    form.hidden = true;
    f.conflict.hidden = true;
    say(f.message, "");
  }

  // The schedule the form holds: { schedule } or, when an input is missing, { problem, input }.
  function formSchedule() {
    const repeat = f.repeat.value;
    const timezone = f.zone.value;
    if (repeat === "cron") return { schedule: { kind: "cron", expression: f.cron.value, timezone } };
    if (PRESETS.includes(repeat)) {
      const expression = presetCron(presetFields());
      if (expression === null) return { problem: "Enter the time of day.", input: "time" };
      return { schedule: { kind: "cron", expression, timezone } };
    }
    const at = instantOf(f.at.value, timezone);
    if (at === null) return { problem: "Enter the date and time of the run.", input: "at" };
    // An unchanged one-off is sent back exactly as stored (a one-off that ran stays done).
    const stored = editing?.mode === "edit" && editing.task.schedule.kind === "once" ? editing.task.schedule : null;
    if (stored && localInput(stored.at, timezone) === f.at.value) return { schedule: { kind: "once", at: stored.at, timezone } };
    return { schedule: { kind: "once", at, timezone } };
  }

  function showRefusal(error) {
    say(f.message, error.message, "error");
    const fields = error.details?.fields || {};
    const input = Object.keys(fields).map((name) => FIELD_INPUTS[name]).find(Boolean);
    if (!input) return;
    // A preset's expression is the form's own: the time is what the owner can change.
    const target = input === "cron" && f.repeat.value !== "cron" ? null : f[input];
    if (target && !target.closest("[hidden]")) {
      target.setAttribute("aria-invalid", "true");
      target.focus();
    }
  }

  async function save() {
    clearInvalid();
    const { schedule, problem, input } = formSchedule();
    if (!schedule) {
      say(f.message, problem, "error");
      f[input].focus();
      return;
    }
    const fields = {
      name: f.name.value,
      instructions: f.instructions.value,
      schedule,
      enabled: f.enabled.checked,
      notify_on_completion: f.notify.checked,
    };
    say(f.message, "Saving…");
    try {
      let task;
      let saved;
      if (editing.mode === "create") {
        const target = f.conversation.value === NEW_CONVERSATION ? { new_conversation: true } : { conversation_id: f.conversation.value };
        task = await api("POST", section.list, { id: editing.id, ...target, ...fields });
        section.tasks = [task, ...section.tasks.filter((t) => t.id !== task.id)];
        saved = target.new_conversation ? `Saved “${task.name}” in a new conversation of that name.` : `Saved “${task.name}”.`;
      } else {
        task = await api("PUT", `${section.list}${editing.task.id}/`, { expected_version: editing.version, ...fields });
        section.tasks = replaceRow(section.tasks, task);
        saved = `Saved “${task.name}”.`;
      }
      section.render();
      closeForm();
      section.say(saved, "ok");
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
        const { conversation_id: was } = editing.task;
        section.tasks = section.tasks.filter((t) => t.id !== editing.task.id);
        section.render();
        editing = { mode: "create", id: newId() };
        await fillConversations(was, { offerNew: true }).catch(() => {});
        f.conversation.disabled = false;
        say(f.message, "This task was deleted elsewhere. Cancel, or create it again as a new task.", "error");
      } else {
        showRefusal(error);
        if (error.code === "id_conflict" && editing.mode === "create") editing.id = newId();
        if (error.code === "task_limit") await section.load().catch(() => {});
      }
    }
  }

  f.repeat.addEventListener("change", () => setRepeat(f.repeat.value));
  f.conversation.addEventListener("change", showConversationHint);
  f.time.addEventListener("input", showRepeat);
  for (const input of [f.day, f.hours]) input.addEventListener("change", showRepeat);
  f.at.addEventListener("input", showYourTime);
  f.zone.addEventListener("change", showYourTime);
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
