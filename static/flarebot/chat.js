// The owner's chat page: conversations in a sidebar (chat-sidebar.js, chat-search.js), the
// selected one's transcript (chat-view.js, chat-turn.js, chat-code.js) fed by its socket
// (chat-stream.js), message actions (chat-actions.js), the header's model and export
// (chat-header.js), and a composer (chat-composer.js). This module wires them together,
// holds the page-wide keyboard shortcuts (Escape, Ctrl+Shift+O; the help list and the skip
// link are chat-keys.js), and starts the page.

import "./chat-actions.js";
import { typingIn } from "./chat-keys.js";
import { attentionChanged, attentionLoad } from "./chat-attention.js";
import { unreadSet, unreadShown } from "./chat-unread.js";
import { loadModel } from "./chat-header.js";
import { clearSearch } from "./chat-search.js";
import { composerChanged, hideComposerError, showComposerError } from "./chat-composer.js";
import { attachmentsFollow, restoreAttachments } from "./chat-attachments.js";
import "./chat-attachment-chips.js";
import { app, hooks, notify, reportError, state, ui } from "./chat-shell.js";
import {
  closeSidebar,
  conversationChanged,
  conversationGone,
  loadConversations,
  openSidebar,
  scheduleConversationsRefresh,
  select,
} from "./chat-sidebar.js";

hooks.conversationGone = conversationGone;
hooks.conversationsChanged = scheduleConversationsRefresh;
hooks.shown = unreadShown;
hooks.unread = unreadSet;
hooks.conversationChanged = conversationChanged;
hooks.attentionChanged = attentionChanged;
hooks.composerError = (message) => (message ? showComposerError(message) : hideComposerError());
hooks.restoreDraft = (text, attachments = []) => {
  restoreAttachments(attachments);
  if (ui.input.value) return;
  ui.input.value = text;
  composerChanged();
};
// Files uploaded to one conversation cannot go to another: showing another drops their chips
// (those of a new chat, uploaded to none, stay for the message that creates the conversation).
const selectedBefore = hooks.selected;
let chosenBeforeStart = false; // the owner picked a conversation or a new chat while the list loaded
hooks.selected = (id) => {
  selectedBefore(id);
  attachmentsFollow(id);
  chosenBeforeStart = true;
};

ui.toggle.addEventListener("click", () => {
  if (app.classList.contains("sidebar-open")) closeSidebar();
  else openSidebar();
});
ui.backdrop.addEventListener("click", closeSidebar);
// Escape undoes one thing at a time: a rename or delete question (their own handlers spend
// it), a text field (Escape only leaves it: what was typed stays, nothing else happens), then
// an open sidebar, then what runs (as Stop does: a browser task is stopped only once asked).
document.addEventListener("keydown", (event) => {
  if (event.key !== "Escape" || event.defaultPrevented || event.isComposing) return;
  if (typingIn(event.target)) {
    event.preventDefault();
    event.target.blur();
  } else if (app.classList.contains("sidebar-open")) {
    event.preventDefault();
    closeSidebar();
    ui.toggle.focus();
  } else if (state.view && !ui.stop.hidden) {
    event.preventDefault();
    state.view.stop();
  }
});

// A conversation comes to exist with its first message: New chat only clears the view.
function newChat() {
  clearSearch();
  select(null);
  ui.input.value = "";
  composerChanged();
  ui.input.focus();
}
ui.newButton.addEventListener("click", newChat);
// Ctrl+Shift+O (Cmd+Shift+O) starts a new chat from anywhere on the page, as in other chat UIs.
document.addEventListener("keydown", (event) => {
  if (!event.shiftKey || !(event.ctrlKey || event.metaKey) || event.altKey || event.isComposing) return;
  if (event.key.toLowerCase() !== "o") return;
  event.preventDefault();
  newChat();
});

// ---------------------------------------------------------------------------------------
// Start

function requestedId() {
  return new URLSearchParams(location.search).get("c");
}

window.addEventListener("popstate", () => {
  const id = requestedId();
  if (id && state.conversations.some((c) => c.id === id)) select(id, { push: false });
});
window.addEventListener("online", () => state.view && state.view.nudge());
document.addEventListener("visibilitychange", () => {
  if (document.visibilityState === "visible" && state.view) state.view.nudge();
});

async function start() {
  loadModel(); // the header's model switch and, for a new owner, what to set up first
  attentionLoad();
  let conversations;
  try {
    conversations = await loadConversations();
  } catch (error) {
    reportError(error);
    setTimeout(start, 3000);
    return;
  }
  // What the owner did while the list loaded stands: a chosen conversation stays chosen and
  // the focus stays where they put it.
  const chosen = chosenBeforeStart ? null : openedFirst(conversations);
  if (!chosenBeforeStart) select(chosen ? chosen.id : null, { push: false });
  composerChanged();
  if (!document.activeElement || document.activeElement === document.body) ui.input.focus();
  if (!state.currentId) document.body.dataset.ready = "1"; // else the transcript's load says so
}

/** The conversation the address names, else the newest. */
function openedFirst(conversations) {
  const wanted = requestedId();
  if (wanted && !conversations.some((c) => c.id === wanted)) notify("That conversation no longer exists.");
  return conversations.find((c) => c.id === wanted) || conversations[0];
}

start();
