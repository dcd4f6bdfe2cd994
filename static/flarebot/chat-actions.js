// Message actions: copy a message (as Markdown) or a code block, Retry a failed or stopped
// answer, Regenerate an answer, Edit a message, and step through versions (‹ 2/3 ›).
// Retry, Regenerate and Edit send the text as a new version of that turn's message
// (`version_of`); the server keeps which branch is shown, and its
// `conversation.branch_switched` event makes every tab load the transcript again. One
// listener on the transcript serves every button, so answers re-rendered while they
// stream need no handlers of their own.

import { ApiError, api } from "./api.js";
import { MAX_CHARS, notify, state, ui } from "./chat-shell.js";
import { button, el, numbers } from "./dom.js";
import { fillTimes, turnOf } from "./chat-turn.js";

const COPIED_MS = 1500;
const live = document.getElementById("live");

/** Say something to screen readers without showing it. */
export function announce(text) {
  live.textContent = "";
  requestAnimationFrame(() => (live.textContent = text));
}

async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    // No clipboard API (an insecure origin) or no permission: the old way, from a selection.
    const area = el("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.className = "visually-hidden";
    document.body.append(area);
    area.select();
    let done = false;
    try {
      done = document.execCommand("copy");
    } catch {
      done = false;
    }
    area.remove();
    return done;
  }
}

async function copyFrom(control, text) {
  const label = control.textContent;
  if (!(await copyText(text))) {
    notify("The browser did not allow copying. Select the text and copy it instead.");
    return;
  }
  control.textContent = "Copied";
  announce("Copied to the clipboard.");
  setTimeout(() => {
    if (control.textContent === "Copied") control.textContent = label;
  }, COPIED_MS);
}

const UNREACHABLE = "Flarebot cannot be reached right now; try again.";

/** Send a text as a new version of this turn's message: the same text answers it again. */
async function sendVersion(turn, text) {
  const view = state.view;
  if (!view || !text || !turn.id) return;
  ui.input.focus();
  try {
    await api(`/api/conversations/${view.id}/messages/`, {
      method: "POST",
      body: { request_id: crypto.randomUUID(), text, version_of: turn.id },
    });
  } catch (error) {
    notify(error instanceof ApiError ? error.message : UNREACHABLE);
  }
}

/** Show another version; the event that follows loads the transcript in every tab. */
async function showVersion(turnId) {
  const view = state.view;
  if (!view || !turnId) return;
  try {
    await api(`/api/conversations/${view.id}/branch/`, { method: "POST", body: { turn_id: turnId } });
    announce("Showing another version.");
  } catch (error) {
    notify(error instanceof ApiError ? error.message : UNREACHABLE);
  }
}

function closeEditor(turn, { focus = true } = {}) {
  const form = turn.el.querySelector(".edit-form");
  if (!form) return;
  form.remove();
  turn.userEl.hidden = false;
  turn.userActionsEl.hidden = false;
  if (focus) turn.userActionsEl.querySelector(".edit").focus();
}

/** Open an editor in place of the last message; sending it makes a new turn. */
function openEditor(turn) {
  if (turn.el.querySelector(".edit-form")) return;
  const form = el("form", "edit-form");
  const area = el("textarea", "edit-text");
  area.value = turn.userText || "";
  area.setAttribute("aria-label", "Edit message");
  area.rows = Math.min(12, Math.max(2, area.value.split("\n").length));
  const error = el("p", "edit-error");
  error.setAttribute("role", "alert");
  error.hidden = true;
  const send = el("button", "primary", "Send");
  send.type = "submit";
  const cancel = button("Cancel", "cancel", () => closeEditor(turn));
  const controls = el("div", "edit-controls");
  controls.append(cancel, send);
  form.append(area, error, controls);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const text = area.value.trim();
    if (!text) return;
    if (text.length > MAX_CHARS) {
      error.textContent = `This message is too long: at most ${numbers.format(MAX_CHARS)} characters.`;
      error.hidden = false;
      return;
    }
    closeEditor(turn, { focus: false });
    sendVersion(turn, text);
  });
  area.addEventListener("keydown", (event) => {
    if (event.key === "Escape") {
      event.preventDefault(); // this Escape is spent: it stops no answer
      closeEditor(turn);
    } else if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      form.requestSubmit();
    }
  });
  turn.userEl.hidden = true;
  turn.userActionsEl.hidden = true;
  turn.userEl.after(form);
  area.focus();
  area.setSelectionRange(area.value.length, area.value.length);
}

ui.inner.addEventListener("click", (event) => {
  const control = event.target.closest("button");
  if (!control || !ui.inner.contains(control)) return;
  if (control.classList.contains("copy-code")) {
    const code = control.closest(".code-block")?.querySelector("pre code");
    if (code) copyFrom(control, code.textContent);
    return;
  }
  const action = control.dataset.action;
  const turn = action ? turnOf(control) : null;
  if (!turn) return;
  if (action === "copy") {
    const answer = control.closest(".answer-actions");
    copyFrom(control, answer ? turn.markdown() : turn.userText || "");
  } else if (action === "retry" || action === "regenerate") {
    sendVersion(turn, turn.userText);
  } else if (action === "edit") {
    openEditor(turn);
  } else if (action === "version") {
    showVersion(control.dataset.target);
  }
});

// A turn's times are written by the time it is pointed at or reached by the keyboard.
for (const kind of ["mouseover", "focusin"]) {
  ui.inner.addEventListener(kind, (event) => {
    const turn = event.target.closest && event.target.closest("article.turn");
    if (turn) fillTimes(turn);
  });
}
