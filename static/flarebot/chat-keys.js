// The chat page's keyboard help: "?" opens the list of shortcuts (a native dialog, closed
// with Esc or its button), "/" goes to the conversation search, and the skip link (the
// page's first Tab stop) goes straight to the message box. Keys typed into a field are
// the field's: none of these fire there.

import { openSidebar } from "./chat-sidebar.js";

const dialog = document.getElementById("shortcuts");
const skip = document.getElementById("skip-to-composer");
const composer = document.getElementById("composer-input");
const search = document.getElementById("search");

/** Whether a key pressed here is the field's own (text is typed there). */
export function typingIn(target) {
  return (
    target instanceof HTMLElement &&
    (target.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(target.tagName))
  );
}

skip.addEventListener("click", (event) => {
  event.preventDefault();
  composer.focus();
});

document.addEventListener("keydown", (event) => {
  if (event.defaultPrevented || event.isComposing || event.ctrlKey || event.metaKey || event.altKey) return;
  if (typingIn(event.target) || dialog.open) return;
  if (event.key === "?") {
    event.preventDefault();
    dialog.showModal();
  } else if (event.key === "/") {
    event.preventDefault();
    if (!search.checkVisibility({ visibilityProperty: true })) openSidebar(); // a narrow screen keeps the list folded away
    search.focus();
  }
});
