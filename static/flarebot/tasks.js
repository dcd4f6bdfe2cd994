// The Tasks section of the settings page: scheduled tasks, their next runs and their history.
// Tasks come from /api/tasks/ (PROTOCOL.md "Scheduled tasks"); limits come from the server as the
// section's data attributes. The page decides by an error's code, never by its message (which it
// shows as the server said it, in words). Times are shown in the task's own zone, with the zone
// named. One operation runs at a time. The list follows the server (tasks-socket.js): a run's
// change, a fire or an edit elsewhere shows without a reload. Its parts: tasks-form.js (with
// tasks-presets.js), tasks-task.js (one task), tasks-runs.js, tasks-time.js, tasks-socket.js.
import { call as api, say } from "./api.js";
import { oneAtATime, reconcile, replaceRow, showCountBadge } from "./section.js";
import { taskForm } from "./tasks-form.js";
import { loadRuns } from "./tasks-runs.js";
import { followTasks } from "./tasks-socket.js";
import { showTask, taskItem } from "./tasks-task.js";

export function tasksSection(root = document.getElementById("tasks")) {
  const maxTasks = Number(root.dataset.maxTasks);
  const find = (selector) => root.querySelector(selector);
  const countBadge = find("#tasks-count");
  const newButton = find("#tasks-new");
  const reloadButton = find("#tasks-reload");
  const sectionMessage = find("#tasks-message");
  const empty = find("#tasks-empty");
  const list = find("#tasks-list");
  let loaded = false;

  // What the section's modules share; the tasks as the server last said them, newest first.
  const section = {
    list: "/api/tasks/",
    tasks: [],
    items: new Map(), // task id -> item
    template: find("#task-item"),
    newButton,
    gate: oneAtATime(root, showLimits),
    form: null,
    render() {
      reconcile(list, section.items, section.tasks, { create: (task) => taskItem(task, section), update: showTask });
    },
    replaced(current) {
      section.tasks = replaceRow(section.tasks, current);
      section.render();
    },
    say: (text, kind) => say(sectionMessage, text, kind),
    load,
  };
  section.form = taskForm(root, section);

  function showLimits() {
    const count = section.tasks.length;
    showCountBadge(countBadge, { loaded, count, max: maxTasks, noun: "tasks" });
    newButton.disabled = !loaded || count >= maxTasks;
    reloadButton.disabled = false;
    empty.hidden = !loaded || count > 0;
  }

  // A read answered after a later one was shown is dropped: answers may arrive out of order.
  let asked = 0;
  let shown = 0;
  async function load() {
    const mine = ++asked;
    const view = await api("GET", section.list);
    if (mine < shown) return;
    shown = mine;
    section.tasks = view.tasks;
    loaded = true;
    section.render();
    showLimits();
    runsShown();
  }

  // Failed and missed runs leave the chat page's needs-you list once the owner has seen
  // them here: when this section, loaded, is on screen in a visible tab.
  let onScreen = false;
  function runsShown() {
    if (!loaded || !onScreen || document.visibilityState !== "visible") return;
    api("POST", "/api/tasks/runs/seen/").catch(() => {}); // the list keeps them; the next showing tries again
  }
  new IntersectionObserver((entries) => {
    onScreen = entries.some((entry) => entry.isIntersecting);
    runsShown();
  }).observe(root);
  document.addEventListener("visibilitychange", runsShown);

  // The socket says the tasks may have changed: read them again, with the histories shown.
  // Notices that come while a read runs make one more read after it, not one each.
  let reading = false;
  let again = false;
  async function follow() {
    if (!loaded) return;
    if (reading) {
      again = true;
      return;
    }
    reading = true;
    try {
      do {
        again = false;
        try {
          await load();
          const open = [...section.items.values()].filter((item) => !item.historyBox.hidden);
          await Promise.all(open.map((item) => loadRuns(item, section, null)));
        } catch {
          // kept as shown: the next change, or Reload, reads them again
        }
      } while (again);
    } finally {
      reading = false;
    }
  }
  followTasks(follow);

  newButton.addEventListener("click", () => section.gate.run(section.form.openCreate));
  reloadButton.addEventListener("click", () =>
    section.gate.run(async () => {
      section.say("Refreshing…");
      try {
        await load();
        section.say("");
      } catch (error) {
        section.say(`Tasks could not be refreshed: ${error.message}`, "error");
      }
    }),
  );
  showLimits();

  return {
    // Load the tasks; rejects (after saying so in the section) when they could not be read.
    load: () => section.gate.first(load, (error) => section.say(`Tasks could not be loaded: ${error.message}`, "error")),
  };
}
