// The Notifications section: destinations (Apprise URLs, shown masked), their Test button,
// the kinds that are sent, quiet hours and the deliveries that failed, through
// /api/notifications/ (PROTOCOL.md "Notifications"). A URL typed here is sent once and never
// read back. Limits come from the server's answer, never repeated here.
import { call as api, say } from "./api.js";
import { localTime } from "./dom.js";
import { fromTemplate } from "./section.js";

const DESTINATIONS = "/api/notifications/destinations/";
const SETTINGS = "/api/notifications/settings/";
const KIND_LABELS = {
  needs_answer: "A browser task needs an answer",
  proposal: "An unattended run proposed a browser task",
  run_failed: "A task run failed or was missed",
  browser_finished: "A browser task finished",
  run_completed: "A task run completed",
};

export function notificationsSection(root = document.getElementById("notifications")) {
  const list = root.querySelector("#notify-destinations");
  const empty = root.querySelector("#notify-empty");
  const item = root.querySelector("#notify-item");
  const addForm = root.querySelector("#notify-add");
  const url = root.querySelector("#notify-url");
  const label = root.querySelector("#notify-label");
  const addButton = root.querySelector("#notify-add-button");
  const addMessage = root.querySelector("#notify-add-message");
  const settingsForm = root.querySelector("#notify-settings");
  const kinds = Array.from(settingsForm.querySelectorAll(".notify-kinds input"));
  const quietEnabled = root.querySelector("#notify-quiet-enabled");
  const quietStart = root.querySelector("#notify-quiet-start");
  const quietEnd = root.querySelector("#notify-quiet-end");
  const quietZone = root.querySelector("#notify-quiet-zone");
  const save = root.querySelector("#notify-settings-save");
  const settingsMessage = root.querySelector("#notify-settings-message");
  const failures = root.querySelector("#notify-failures");
  const noFailures = root.querySelector("#notify-no-failures");
  const settingsControls = [...kinds, quietEnabled, quietStart, quietEnd, quietZone, save];
  let limits = null;
  let count = 0;

  function enable(elements, on) {
    for (const element of elements) element.disabled = !on;
  }

  function showDestinations(destinations) {
    count = destinations.length;
    list.replaceChildren(...destinations.map(destinationItem));
    empty.hidden = destinations.length > 0;
    const full = limits && count >= limits.max_destinations;
    enable([url, label, addButton], !full);
    if (full) say(addMessage, `At most ${limits.max_destinations} destinations: delete one to add another.`);
  }

  function destinationItem(destination) {
    const { node, part } = fromTemplate(item);
    node.dataset.id = destination.id;
    part("label").textContent = destination.label;
    part("url").textContent = destination.url;
    const test = part("test");
    const remove = part("delete");
    const message = part("message");
    test.setAttribute("aria-label", `Test ${destination.label}`);
    remove.setAttribute("aria-label", `Delete ${destination.label}`);
    test.addEventListener("click", async () => {
      test.disabled = true;
      say(message, "Sending a test message…");
      try {
        const outcome = await api("POST", `${DESTINATIONS}${destination.id}/test/`, {});
        say(message, outcome.message, outcome.ok ? "ok" : "error");
      } catch (error) {
        say(message, error.message, "error");
      } finally {
        test.disabled = false;
      }
    });
    remove.addEventListener("click", async () => {
      if (!window.confirm(`Delete the destination “${destination.label}”? Nothing more is sent to it.`)) return;
      remove.disabled = true;
      try {
        await api("DELETE", `${DESTINATIONS}${destination.id}/`);
        await loadDestinations();
        say(addMessage, `Deleted “${destination.label}”.`, "ok");
      } catch (error) {
        say(message, error.message, "error");
        remove.disabled = false;
      }
    });
    return node;
  }

  function showSettings(settings) {
    for (const input of kinds) input.checked = Boolean(settings.kinds[input.name]);
    const quiet = settings.quiet_hours;
    quietEnabled.checked = quiet.enabled;
    quietStart.value = quiet.start || "22:00";
    quietEnd.value = quiet.end || "07:00";
    // A zone never saved: this browser's, which the owner can change before saving.
    quietZone.value = quiet.start ? quiet.time_zone : Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
    showFailures(settings.failures);
    enable(settingsControls, true);
  }

  function showFailures(rows) {
    noFailures.hidden = rows.length > 0;
    failures.replaceChildren(
      ...rows.map((row) => {
        const li = document.createElement("li");
        const title = document.createElement("strong");
        title.textContent = `${row.title} → ${row.destination_label}`;
        const when = row.failed_at ? localTime(row.failed_at) : "";
        li.append(title, " ", when, document.createElement("br"), `${KIND_LABELS[row.kind] || row.kind}: ${row.error}`);
        return li;
      }),
    );
  }

  async function loadDestinations() {
    const answer = await api("GET", DESTINATIONS);
    limits = answer.limits;
    url.maxLength = limits.url_max;
    label.maxLength = limits.label_max;
    showDestinations(answer.destinations);
  }

  async function load() {
    await Promise.all([loadDestinations(), api("GET", SETTINGS).then(showSettings)]);
  }

  addForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (!url.value.trim() || !label.value.trim()) {
      say(addMessage, "Enter an Apprise URL and a label.", "error");
      (url.value.trim() ? label : url).focus();
      return;
    }
    enable([url, label, addButton], false);
    say(addMessage, "Adding…");
    try {
      const added = await api("POST", DESTINATIONS, { url: url.value.trim(), label: label.value.trim() });
      addForm.reset();
      say(addMessage, `Added “${added.label}” (${added.url}). Use Test to check that it arrives.`, "ok");
      await loadDestinations();
    } catch (error) {
      say(addMessage, error.message, "error");
      const field = error.code === "invalid_url" ? "url" : Object.keys(error.details.fields || {})[0];
      enable([url, label, addButton], true);
      (field === "label" ? label : url).focus();
    }
  });

  settingsForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = {
      kinds: Object.fromEntries(kinds.map((input) => [input.name, input.checked])),
      quiet_hours: {
        enabled: quietEnabled.checked,
        start: quietStart.value || null,
        end: quietEnd.value || null,
        time_zone: quietZone.value.trim() || "UTC",
      },
    };
    enable(settingsControls, false);
    say(settingsMessage, "Saving…");
    try {
      showSettings(await api("PUT", SETTINGS, body));
      say(settingsMessage, "Saved.", "ok");
    } catch (error) {
      say(settingsMessage, error.message, "error");
      enable(settingsControls, true);
    }
  });

  return { load };
}
