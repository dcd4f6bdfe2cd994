// One task of the Tasks section: its schedule in the server's words, its next three runs in
// its own zone (a one-off with the browser's time beside it when the zones differ), its runs,
// and its actions. `section` is the section's shared state (tasks.js).
import { call as api, say } from "./api.js";
import { el } from "./dom.js";
import { fromTemplate, rowAfterRemoval } from "./section.js";
import { loadRuns, runLine, runNow, toggleHistory } from "./tasks-runs.js";
import { timeNode, yourTime, zoneOf } from "./tasks-time.js";

const NEXT_SHOWN = 3; // of the task's `upcoming`

export function taskItem(task, section) {
  const { gate } = section;
  const { node, part } = fromTemplate(section.template);
  const item = {
    task,
    node,
    name: part("name"),
    state: part("state"),
    schedule: part("schedule"),
    next: part("next"),
    upcomingBox: part("upcoming-box"),
    upcomingLabel: part("upcoming-label"),
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
  item.editButton.addEventListener("click", () => gate.run(() => section.form.openEdit(item.task)));
  item.toggleButton.addEventListener("click", () => gate.run(() => toggle(item, section)));
  item.runButton.addEventListener("click", () => gate.run(() => runNow(item, section)));
  item.historyButton.addEventListener("click", () => gate.run(() => toggleHistory(item, section)));
  item.more.addEventListener("click", () => gate.run(() => loadRuns(item, section, item.cursor)));
  item.deleteButton.addEventListener("click", () => {
    if (gate.busy) return;
    item.confirm.hidden = false;
    item.keepButton.focus();
  });
  item.keepButton.addEventListener("click", () => {
    item.confirm.hidden = true;
    item.deleteButton.focus();
  });
  item.confirmButton.addEventListener("click", () => gate.run(() => remove(item, section)));
  showTask(item, task);
  return item;
}

export function showTask(item, task) {
  item.task = task;
  const zone = zoneOf(task);
  item.name.textContent = task.name;
  const done = task.schedule.kind === "once" && task.enabled && !task.next_run_at && !task.scheduling_error;
  item.state.dataset.state = !task.enabled ? "disabled" : done ? "done" : "enabled";
  item.state.textContent = !task.enabled ? "Disabled" : done ? "Done" : "Enabled";
  item.schedule.replaceChildren(task.schedule_text);
  item.schedule.title = task.schedule.kind === "cron" ? `Cron: ${task.schedule.expression}` : "";
  const beside = task.schedule.kind === "once" ? yourTime(task.schedule.at, zone) : null;
  if (beside) item.schedule.append(" · ", beside);
  const next = task.upcoming.slice(0, NEXT_SHOWN);
  item.upcomingLabel.textContent = next.length === 1 ? "Next run" : "Next runs";
  item.upcoming.replaceChildren(...next.map((at) => {
    const li = el("li");
    li.append(timeNode(at, zone));
    return li;
  }));
  item.upcomingBox.hidden = next.length === 0;
  item.next.textContent = next.length ? "" : !task.enabled ? "Not scheduled while disabled." : done ? "Ran; give it a new time to run again." : "No next run.";
  item.next.hidden = next.length > 0;
  item.previous.replaceChildren();
  if (task.previous_run) item.previous.append("Last run: ", runLine(task.previous_run, zone));
  item.error.textContent = task.scheduling_error ? "The schedule could not be armed; Flarebot keeps trying." : "";
  item.toggleButton.textContent = task.enabled ? "Disable" : "Enable";
  item.node.dataset.enabled = task.enabled ? "1" : "";
}

/** Say a refused change; a stale version shows the task as it is now. */
function refused(item, section, error, stale) {
  if (error.code === "version_conflict" && error.details.current) {
    section.replaced(error.details.current);
    say(item.message, stale, "error");
  } else {
    say(item.message, error.message, "error");
  }
}

async function toggle(item, section) {
  const task = item.task;
  say(item.message, task.enabled ? "Disabling…" : "Enabling…");
  try {
    const body = { expected_version: task.version, name: task.name, instructions: task.instructions, schedule: task.schedule, enabled: !task.enabled };
    section.replaced(await api("PUT", `${section.list}${task.id}/`, body));
    say(item.message, item.task.enabled ? "Enabled." : "Disabled: it will not run on its schedule.", "ok");
  } catch (error) {
    refused(item, section, error, "Not changed: the task was changed elsewhere; it is shown as it is now.");
  }
  item.toggleButton.focus();
}

async function remove(item, section) {
  const index = section.tasks.findIndex((t) => t.id === item.task.id);
  say(item.message, "Deleting…");
  try {
    await api("DELETE", `${section.list}${item.task.id}/?expected_version=${item.task.version}`);
    section.tasks = section.tasks.filter((t) => t.id !== item.task.id);
    section.render();
    section.say(`Task “${item.task.name}” deleted.`, "ok");
    const next = rowAfterRemoval(section.tasks, index);
    (next ? section.items.get(next.id)?.editButton : section.newButton)?.focus();
  } catch (error) {
    item.confirm.hidden = true;
    refused(item, section, error, "Not deleted: the task was changed elsewhere; it is shown as it is now. Delete it again if you still want to.");
    item.deleteButton.focus();
  }
}
