// The Tasks section of the settings page: scheduled tasks, their next runs and their history.
// Tasks come from /api/tasks/ (PROTOCOL.md "Scheduled tasks"); limits come from the server as the
// section's data attributes. The page decides by an error's code, never by its message. Times are
// shown in the task's own zone (a repeating task) or the browser's (a one-off), with the zone named.
// One operation runs at a time; a failed save keeps the form as the owner wrote it.
import { ApiError, call as api, say } from "./api.js";

const LIST = "/api/tasks/";
const numbers = new Intl.NumberFormat("en-US");
const BROWSER_ZONE = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
const STATUS_LABELS = {
  pending: "Pending",
  running: "Running",
  completed: "Completed",
  failed: "Failed",
  cancelled: "Cancelled",
  missed: "Missed",
};

function newId() {
  if (crypto.randomUUID) return crypto.randomUUID();
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  bytes[6] = (bytes[6] & 0x0f) | 0x40;
  bytes[8] = (bytes[8] & 0x3f) | 0x80;
  const hex = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

// ---- time zones ----------------------------------------------------------------------

function zones() {
  let names = [];
  try {
    names = Intl.supportedValuesOf("timeZone");
  } catch {
    names = [];
  }
  return Array.from(new Set(["UTC", BROWSER_ZONE, ...names])).sort((a, b) => (a === "UTC" ? -1 : b === "UTC" ? 1 : a.localeCompare(b)));
}

// The wall clock of an instant in a zone, as milliseconds of the same fields in UTC.
function wallOf(ms, zone) {
  const format = new Intl.DateTimeFormat("en-US", {
    timeZone: zone, hourCycle: "h23", year: "numeric", month: "2-digit", day: "2-digit",
    hour: "2-digit", minute: "2-digit", second: "2-digit",
  });
  const p = Object.fromEntries(format.formatToParts(new Date(ms)).map((part) => [part.type, part.value]));
  return Date.UTC(Number(p.year), Number(p.month) - 1, Number(p.day), Number(p.hour), Number(p.minute), Number(p.second));
}

// The instant whose wall clock in `zone` is the datetime-local value `text` (YYYY-MM-DDTHH:MM[:SS]).
function instantOf(text, zone) {
  const m = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2}))?$/.exec(text);
  if (!m) return null;
  const wall = Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]), Number(m[4]), Number(m[5]), Number(m[6] || 0));
  let guess = wall - (wallOf(wall, zone) - wall);
  guess = wall - (wallOf(guess, zone) - guess);
  return new Date(guess).toISOString().replace(/\.\d{3}Z$/, "Z");
}

function localInput(iso, zone) {
  const wall = new Date(wallOf(Date.parse(iso), zone)).toISOString();
  return wall.slice(0, 19);
}

function formatIn(iso, zone) {
  return new Intl.DateTimeFormat(undefined, {
    timeZone: zone, weekday: "short", year: "numeric", month: "short", day: "numeric",
    hour: "2-digit", minute: "2-digit", timeZoneName: "short",
  }).format(new Date(iso));
}

function zoneOf(task) {
  return task.schedule.kind === "cron" ? task.schedule.timezone : BROWSER_ZONE;
}

function timeNode(iso, zone) {
  const node = document.createElement("time");
  node.dateTime = iso;
  node.textContent = formatIn(iso, zone);
  return node;
}

// ---- the section ---------------------------------------------------------------------

export function tasksSection(root = document.getElementById("tasks")) {
  const maxTasks = Number(root.dataset.maxTasks);
  const maxName = Number(root.dataset.maxName);
  const maxInstructions = Number(root.dataset.maxInstructions);
  const find = (selector) => root.querySelector(selector);
  const countBadge = find("#tasks-count");
  const newButton = find("#tasks-new");
  const reloadButton = find("#tasks-reload");
  const sectionMessage = find("#tasks-message");
  const empty = find("#tasks-empty");
  const list = find("#tasks-list");
  const template = find("#task-item");
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
  f.name.maxLength = maxName;

  let tasks = []; // as the server last said them, newest first
  const items = new Map(); // task id -> item
  let loaded = false;
  let busy = false;
  // The form: a new task keeps its id across retries, so a lost reply cannot create two.
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

  function countInstructions() {
    const length = f.instructions.value.length; // UTF-16 code units, the server's unit
    const over = length - maxInstructions;
    f.counter.textContent = `${numbers.format(length)} / ${numbers.format(maxInstructions)}` + (over > 0 ? ` (${numbers.format(over)} over)` : "");
    f.counter.dataset.over = over > 0 ? "1" : "";
  }

  function showLimits() {
    const count = tasks.length;
    countBadge.textContent = loaded ? `${numbers.format(count)} of ${numbers.format(maxTasks)} tasks` : "…";
    countBadge.dataset.state = !loaded ? "unknown" : count >= maxTasks ? "full" : count >= maxTasks * 0.9 ? "near" : "ok";
    newButton.disabled = !loaded || count >= maxTasks;
    reloadButton.disabled = false;
    empty.hidden = !loaded || count > 0;
  }

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

  // ---- the form --------------------------------------------------------------------

  async function fillConversations(selected) {
    const view = await api("GET", "/api/conversations/");
    f.conversation.replaceChildren();
    for (const c of view.conversations) f.conversation.append(new Option(c.name, c.id, false, c.id === selected));
    return view.conversations.length;
  }

  function setKind(value) {
    form.querySelector(`input[name=kind][value=${value}]`).checked = true;
    showKind();
  }

  async function openCreate() {
    say(sectionMessage, "");
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
    countInstructions();
    say(f.message, count ? "" : "Create a conversation first: a task sends its instructions to one.", count ? "" : "error");
    form.hidden = false;
    f.name.focus();
  }

  async function openEdit(task) {
    say(sectionMessage, "");
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
    countInstructions();
    say(f.message, "");
    form.hidden = false;
    f.name.focus();
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
        task = await api("POST", LIST, { id: editing.id, conversation_id: f.conversation.value, ...fields });
        tasks = [task, ...tasks.filter((t) => t.id !== task.id)];
      } else {
        task = await api("PUT", `${LIST}${editing.task.id}/`, { expected_version: editing.version, ...fields });
        tasks = tasks.map((t) => (t.id === task.id ? task : t));
      }
      render();
      closeForm();
      say(sectionMessage, `Saved “${task.name}”.`, "ok");
      items.get(task.id)?.editButton.focus();
    } catch (error) {
      if (error.code === "version_conflict" && error.details.current) {
        // The next Save is based on the current version: it replaces that version on purpose.
        const current = error.details.current;
        editing.version = current.version;
        editing.task = current;
        tasks = tasks.map((t) => (t.id === current.id ? current : t));
        render();
        f.conflictVersion.textContent = String(current.version);
        f.conflict.hidden = false;
        say(f.message, "Not saved: the task was changed elsewhere.", "error");
      } else if (error.code === "not_found" && editing.mode === "edit") {
        tasks = tasks.filter((t) => t.id !== editing.task.id);
        render();
        say(f.message, "This task was deleted elsewhere. Cancel, or create it again as a new task.", "error");
        editing = { mode: "create", id: newId() };
        f.conversation.disabled = false;
      } else {
        say(f.message, error.message, "error");
        if (error.code === "id_conflict" && editing.mode === "create") editing.id = newId();
        if (error.code === "task_limit") await load().catch(() => {});
      }
    }
  }

  form.addEventListener("change", (event) => {
    if (event.target.name === "kind") showKind();
  });
  f.instructions.addEventListener("input", countInstructions);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (editing) exclusive(save);
  });
  f.cancel.addEventListener("click", () => {
    if (!busy) closeForm();
  });
  newButton.addEventListener("click", () => exclusive(openCreate));

  // ---- one task ----------------------------------------------------------------------

  function createItem(task) {
    const node = template.content.firstElementChild.cloneNode(true);
    const part = (role) => node.querySelector(`[data-role="${role}"]`);
    const item = {
      task,
      node,
      name: part("name"),
      state: part("state"),
      schedule: part("schedule"),
      next: part("next"),
      upcomingBox: part("upcoming-box"),
      upcoming: part("upcoming"),
      previous: part("previous"),
      error: part("error"),
      editButton: part("edit"),
      toggleButton: part("toggle"),
      runButton: part("run"),
      historyButton: part("history"),
      deleteButton: part("delete"),
      confirm: part("confirm"),
      confirmButton: part("confirm-delete"),
      keepButton: part("keep"),
      historyBox: part("history-box"),
      runs: part("runs"),
      more: part("more"),
      message: part("message"),
      runRequest: null, // kept until the server answered, so a retry cannot run it twice
      cursor: null,
    };
    node.dataset.id = task.id;
    item.confirm.setAttribute("aria-label", "Confirm deletion");
    item.editButton.addEventListener("click", () => exclusive(() => openEdit(item.task)));
    item.toggleButton.addEventListener("click", () => exclusive(() => toggle(item)));
    item.runButton.addEventListener("click", () => exclusive(() => runNow(item)));
    item.historyButton.addEventListener("click", () => exclusive(() => showHistory(item, !item.historyBox.hidden)));
    item.more.addEventListener("click", () => exclusive(() => loadRuns(item, item.cursor)));
    item.deleteButton.addEventListener("click", () => {
      if (busy) return;
      item.confirm.hidden = false;
      item.keepButton.focus();
    });
    item.keepButton.addEventListener("click", () => {
      item.confirm.hidden = true;
      item.deleteButton.focus();
    });
    item.confirmButton.addEventListener("click", () => exclusive(() => remove(item)));
    showTask(item, task);
    return item;
  }

  function runLink(run) {
    const link = document.createElement("a");
    link.href = `/?c=${encodeURIComponent(run.conversation_id)}` + (run.turn_id ? `#turn-${run.turn_id}` : "");
    link.textContent = run.turn_id ? "Open in its conversation" : "Open its conversation";
    return link;
  }

  function runLine(run, zone) {
    const line = document.createElement("span");
    const badge = document.createElement("span");
    badge.className = "badge";
    badge.dataset.state = run.status;
    badge.textContent = STATUS_LABELS[run.status] || run.status;
    line.append(badge, " ", timeNode(run.intended_at, zone));
    line.append(run.source === "manual" ? " · run now" : " · scheduled");
    if (run.status === "missed" && run.missed_count > 1) line.append(` · ${numbers.format(run.missed_count)} runs missed`);
    line.append(" · ", runLink(run));
    return line;
  }

  function showTask(item, task) {
    item.task = task;
    const zone = zoneOf(task);
    item.name.textContent = task.name;
    const done = task.schedule.kind === "once" && task.enabled && !task.next_run_at && !task.scheduling_error;
    item.state.dataset.state = !task.enabled ? "disabled" : done ? "done" : "enabled";
    item.state.textContent = !task.enabled ? "Disabled" : done ? "Done" : "Enabled";
    item.schedule.replaceChildren();
    if (task.schedule.kind === "cron") {
      const code = document.createElement("code");
      code.textContent = task.schedule.expression;
      item.schedule.append("Repeats ", code, ` in ${task.schedule.timezone}`);
    } else {
      item.schedule.append("Once, ", timeNode(task.schedule.at, zone));
    }
    item.next.replaceChildren();
    if (task.next_run_at) item.next.append("Next run: ", timeNode(task.next_run_at, zone));
    else item.next.append(!task.enabled ? "Not scheduled while disabled." : done ? "Ran; give it a new time to run again." : "No next run.");
    item.upcoming.replaceChildren(...task.upcoming.map((at) => {
      const li = document.createElement("li");
      li.append(timeNode(at, zone));
      return li;
    }));
    item.upcomingBox.hidden = task.upcoming.length === 0;
    item.previous.replaceChildren();
    if (task.previous_run) item.previous.append("Last run: ", runLine(task.previous_run, zone));
    item.error.textContent = task.scheduling_error ? "The schedule could not be armed; Flarebot keeps trying." : "";
    item.toggleButton.textContent = task.enabled ? "Disable" : "Enable";
    item.node.dataset.enabled = task.enabled ? "1" : "";
  }

  function render() {
    const wanted = new Set(tasks.map((t) => t.id));
    for (const [id, item] of items) {
      if (!wanted.has(id)) {
        item.node.remove();
        items.delete(id);
      }
    }
    let at = list.firstElementChild;
    for (const task of tasks) {
      let item = items.get(task.id);
      if (!item) {
        item = createItem(task);
        items.set(task.id, item);
      } else {
        showTask(item, task);
      }
      if (item.node === at) at = at.nextElementSibling;
      else list.insertBefore(item.node, at);
    }
  }

  function replaced(current) {
    tasks = tasks.map((t) => (t.id === current.id ? current : t));
    render();
  }

  async function toggle(item) {
    const task = item.task;
    say(item.message, task.enabled ? "Disabling…" : "Enabling…");
    try {
      const body = { expected_version: task.version, name: task.name, instructions: task.instructions, schedule: task.schedule, enabled: !task.enabled };
      replaced(await api("PUT", `${LIST}${task.id}/`, body));
      say(item.message, item.task.enabled ? "Enabled." : "Disabled: it will not run on its schedule.", "ok");
    } catch (error) {
      if (error.code === "version_conflict" && error.details.current) {
        replaced(error.details.current);
        say(item.message, "Not changed: the task was changed elsewhere; it is shown as it is now.", "error");
      } else {
        say(item.message, error.message, "error");
      }
    }
    item.toggleButton.focus();
  }

  async function runNow(item) {
    item.runRequest = item.runRequest || newId();
    say(item.message, "Starting…");
    try {
      const run = await api("POST", `${LIST}${item.task.id}/runs/`, { request_id: item.runRequest });
      item.runRequest = null;
      item.message.replaceChildren("Started: ", runLink(run));
      item.message.dataset.kind = "ok";
      const task = await api("GET", `${LIST}${item.task.id}/`);
      replaced(task);
      if (!item.historyBox.hidden) await loadRuns(item, null);
    } catch (error) {
      if (error instanceof ApiError && error.status !== 0) item.runRequest = null;
      say(item.message, error.message, "error");
    }
  }

  async function loadRuns(item, cursor) {
    const query = cursor ? `?limit=25&before=${encodeURIComponent(cursor)}` : "?limit=25";
    try {
      const page = await api("GET", `${LIST}${item.task.id}/runs/${query}`);
      const zone = zoneOf(item.task);
      const rows = page.runs.map((run) => {
        const li = document.createElement("li");
        li.dataset.status = run.status;
        li.append(runLine(run, zone));
        return li;
      });
      if (cursor) item.runs.append(...rows);
      else item.runs.replaceChildren(...rows);
      if (!cursor && rows.length === 0) {
        const li = document.createElement("li");
        li.className = "muted";
        li.textContent = "No runs yet.";
        item.runs.append(li);
      }
      item.cursor = page.next_cursor;
      item.more.hidden = !page.next_cursor;
    } catch (error) {
      say(item.message, `History could not be loaded: ${error.message}`, "error");
    }
  }

  async function showHistory(item, open) {
    if (open) {
      item.historyBox.hidden = true;
      item.historyButton.textContent = "History";
      item.historyButton.setAttribute("aria-expanded", "false");
      return;
    }
    item.historyBox.hidden = false;
    item.historyButton.textContent = "Hide history";
    item.historyButton.setAttribute("aria-expanded", "true");
    await loadRuns(item, null);
  }

  async function remove(item) {
    const index = tasks.findIndex((t) => t.id === item.task.id);
    say(item.message, "Deleting…");
    try {
      await api("DELETE", `${LIST}${item.task.id}/?expected_version=${item.task.version}`);
      tasks = tasks.filter((t) => t.id !== item.task.id);
      render();
      say(sectionMessage, `Task “${item.task.name}” deleted.`, "ok");
      const next = tasks[index] || tasks[index - 1];
      (next ? items.get(next.id)?.editButton : newButton)?.focus();
    } catch (error) {
      item.confirm.hidden = true;
      if (error.code === "version_conflict" && error.details.current) {
        replaced(error.details.current);
        say(item.message, "Not deleted: the task was changed elsewhere; it is shown as it is now. Delete it again if you still want to.", "error");
      } else {
        say(item.message, error.message, "error");
      }
      item.deleteButton.focus();
    }
  }

  async function load() {
    const view = await api("GET", LIST);
    tasks = view.tasks;
    loaded = true;
    render();
    showLimits();
  }

  reloadButton.addEventListener("click", () =>
    exclusive(async () => {
      say(sectionMessage, "Refreshing…");
      try {
        await load();
        say(sectionMessage, "");
      } catch (error) {
        say(sectionMessage, `Tasks could not be refreshed: ${error.message}`, "error");
      }
    }),
  );
  showLimits();

  return {
    // Load the tasks; rejects (after saying so in the section) when they could not be read.
    async load() {
      busy = true;
      try {
        await load();
      } catch (error) {
        say(sectionMessage, `Tasks could not be loaded: ${error.message}`, "error");
        throw error;
      } finally {
        busy = false;
        showLimits();
      }
    },
  };
}
