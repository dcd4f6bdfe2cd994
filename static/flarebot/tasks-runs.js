// A task's runs: one run's line, Run now, and the history (25 runs a page).
import { ApiError, call as api, say } from "./api.js";
import { el, newId, numbers } from "./dom.js";
import { timeNode, zoneOf } from "./tasks-time.js";

const STATUS_LABELS = {
  pending: "Pending",
  running: "Running",
  completed: "Completed",
  failed: "Failed",
  cancelled: "Cancelled",
  missed: "Missed",
};

function runLink(run) {
  const link = el("a", "", run.turn_id ? "Open in its conversation" : "Open its conversation");
  link.href = `/?c=${encodeURIComponent(run.conversation_id)}` + (run.turn_id ? `#turn-${run.turn_id}` : "");
  return link;
}

export function runLine(run, zone) {
  const line = el("span");
  const badge = el("span", "badge", STATUS_LABELS[run.status] || run.status);
  badge.dataset.state = run.status;
  line.append(badge, " ", timeNode(run.intended_at, zone));
  line.append(run.source === "manual" ? " · run now" : " · scheduled");
  if (run.status === "missed" && run.missed_count > 1) line.append(` · ${numbers.format(run.missed_count)} runs missed`);
  line.append(" · ", runLink(run));
  return line;
}

export async function runNow(item, section) {
  item.runRequest = item.runRequest || newId();
  say(item.message, "Starting…");
  try {
    const run = await api("POST", `${section.list}${item.task.id}/runs/`, { request_id: item.runRequest });
    item.runRequest = null;
    // "Started" comes last, when the section takes clicks again (one operation at a time):
    // a click on History the moment it shows must not be dropped.
    await api("GET", `${section.list}${item.task.id}/`).then(section.replaced, () => {}); // the next load shows it
    if (!item.historyBox.hidden) await loadRuns(item, section, null);
    item.message.replaceChildren("Started: ", runLink(run));
    item.message.dataset.kind = "ok";
  } catch (error) {
    if (error instanceof ApiError && error.status !== 0) item.runRequest = null;
    say(item.message, error.message, "error");
  }
}

/** Show the first page of runs, or append the page before `cursor`. */
export async function loadRuns(item, section, cursor) {
  const query = cursor ? `?limit=25&before=${encodeURIComponent(cursor)}` : "?limit=25";
  try {
    const page = await api("GET", `${section.list}${item.task.id}/runs/${query}`);
    const zone = zoneOf(item.task);
    const rows = page.runs.map((run) => {
      const li = el("li");
      li.dataset.status = run.status;
      li.append(runLine(run, zone));
      return li;
    });
    if (cursor) item.runs.append(...rows);
    else item.runs.replaceChildren(...rows);
    if (!cursor && rows.length === 0) item.runs.append(el("li", "muted", "No runs yet."));
    item.cursor = page.next_cursor;
    item.more.hidden = !page.next_cursor;
  } catch (error) {
    say(item.message, `History could not be loaded: ${error.message}`, "error");
  }
}

export async function toggleHistory(item, section) {
  const open = !item.historyBox.hidden;
  item.historyBox.hidden = open;
  item.historyButton.textContent = open ? "History" : "Hide history";
  item.historyButton.setAttribute("aria-expanded", String(!open));
  if (!open) await loadRuns(item, section, null);
}
