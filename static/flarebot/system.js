// The System section: what this installation runs on and what is missing, with the fix.
// Loaded from /api/system/ (nothing secret in it); shown as text only. Reload asks again.
import { call as api, say } from "./api.js";
import { el } from "./dom.js";

const STATE_TEXT = { ok: "OK", missing: "Missing", error: "Error", unknown: "Unknown" };

export function systemSection(root = document.getElementById("system")) {
  const list = root.querySelector("#system-list");
  const message = root.querySelector("#system-message");
  const reload = root.querySelector("#system-reload");

  function show(components) {
    const rows = components.map((component) => {
      const row = el("li", "system-row");
      row.dataset.component = component.name;
      row.dataset.state = component.state;
      const head = el("div", "system-head");
      const badge = el("span", "badge", STATE_TEXT[component.state] || component.state);
      badge.dataset.state = component.state === "ok" ? "configured" : component.state;
      head.append(el("strong", "system-label", component.label), badge);
      row.append(head, el("p", "system-detail muted", component.detail));
      if (component.fix) row.append(el("p", "system-fix", component.fix));
      return row;
    });
    list.replaceChildren(...rows);
  }

  async function load() {
    reload.disabled = true;
    try {
      const data = await api("GET", "/api/system/");
      show(data.components);
      say(message, "");
    } catch (error) {
      say(message, error.message, "error");
      throw error;
    } finally {
      reload.disabled = false;
    }
  }

  reload.addEventListener("click", () => load().catch(() => {}));
  return { load };
}
