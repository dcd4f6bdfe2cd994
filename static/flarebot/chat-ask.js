// A question asked in the page, never with the browser's confirm(): a small modal dialog
// whose focus starts on the answer that changes nothing, so Enter or Esc there leaves all
// as it was; focus returns to where it was once it closes. Stopping a browser task
// (chat-view.js) asks with it.

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
