// Asking and taking back on the chat page, never with the browser's confirm(). `ask` is a
// small modal dialog whose focus starts on the answer that changes nothing, so Enter or Esc
// there leaves all as it was; focus returns to where it was once it closes (stopping a
// browser task, chat-view.js; clearing a history, chat-header.js). `offerUndo` is the bar
// that a deletion (chat-sidebar.js) and a cleared history wait behind for UNDO_MS before
// they are sent: one at a time (a newer one sends the older at once), and all at once,
// with `keepalive`, when the page is left, as the owner confirmed them.

import { button, el, newId } from "./dom.js";

/** Ask `question` in the page; true when the owner chose `yes`, false when they dismissed it. */
export function ask({ question, yes, no = "Cancel" }) {
  const dialog = el("dialog", "ask");
  dialog.setAttribute("role", "alertdialog");
  const text = el("p", "ask-question", question);
  text.id = `ask-${newId()}`;
  dialog.setAttribute("aria-labelledby", text.id);
  const before = document.activeElement;
  let answer = false;
  const close = (chosen) => {
    answer = chosen;
    dialog.close();
  };
  const accept = button(yes, "ask-yes", () => close(true));
  const keep = button(no, "ask-no", () => close(false));
  const actions = el("div", "ask-actions");
  actions.append(accept, keep);
  dialog.append(text, actions);
  // Esc dismisses the question and nothing else: the page's own Esc would stop an answer.
  dialog.addEventListener("keydown", (event) => {
    if (event.key !== "Escape") return;
    event.preventDefault();
    close(false);
  });
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => {
      dialog.remove();
      if (before instanceof HTMLElement && before.isConnected && before !== document.body) before.focus();
      resolve(answer);
    });
    document.body.append(dialog);
    dialog.showModal();
    keep.focus();
  });
}

/** How long a deletion or a cleared history can be taken back before it is sent. */
export const UNDO_MS = 10_000;

let offered = null; // the Undo bar shown

/**
 * Show `text` with Undo for UNDO_MS: Undo calls `undo`; else `done({keepalive})` runs when
 * the time is up, or at once through the returned `now()`.
 */
export function offerUndo({ text, undo, done }) {
  if (offered) offered.now();
  const bar = el("div", "undo-bar");
  bar.setAttribute("role", "status");
  let timer = 0;
  const close = () => {
    clearTimeout(timer);
    bar.remove();
    if (offered === offer) offered = null;
  };
  const offer = {
    now({ keepalive = false } = {}) {
      if (!bar.isConnected) return;
      close();
      done({ keepalive });
    },
  };
  const taken = button("Undo", "undo", () => {
    close();
    undo();
  });
  bar.append(el("span", "", text), taken);
  document.body.append(bar);
  timer = setTimeout(() => offer.now(), UNDO_MS);
  offered = offer;
  return offer;
}

window.addEventListener("pagehide", () => {
  if (offered) offered.now({ keepalive: true });
});
