// What every part of the chat page shares: its elements, the limits and tool names the
// server gave it, notices, the connection badge, scrolling, the page's state, and the hooks
// through which a lower module (a conversation's view) tells an upper one (the sidebar, the
// composer) that something happened, so that imports run one way: chat.js -> header,
// search, actions, composer -> sidebar -> view -> stream, browser tasks, turn -> tools,
// code, markdown -> shell -> api, dom (the DOM helpers every page shares).

import { ApiError } from "./api.js";

export const app = document.getElementById("app");
const $ = (id) => document.getElementById(id);
// Limits come from the server (the template), never repeated here.
export const MAX_CHARS = Number(app.dataset.maxChars);
export const MAX_NAME = Number(app.dataset.maxName);
export const MAX_QUERY = Number(app.dataset.maxQuery);
// The tools whose results carry sources listed under an answer, as the server declares them.
export const SOURCE_TOOLS = new Set(app.dataset.sourceTools.split(" ").filter(Boolean));
export const ACTIVE = new Set(["queued", "running"]);

export const ui = {
  list: $("conversation-list"),
  listEmpty: $("conversation-empty"),
  newButton: $("new-conversation"),
  toggle: $("sidebar-toggle"),
  backdrop: $("backdrop"),
  title: $("conversation-title"),
  connection: $("connection"),
  notice: $("notice"),
  transcript: $("transcript"),
  inner: $("transcript-inner"),
  empty: $("empty-state"),
  composer: $("composer"),
  input: $("composer-input"),
  error: $("composer-error"),
  count: $("composer-count"),
  send: $("send"),
  stop: $("stop"),
  toBottom: $("to-bottom"),
  attention: $("attention"),
  attentionCount: $("attention-count"),
  attentionList: $("attention-list"),
};

/** The page's state: the conversations, the selected one and its view. */
export const state = {
  conversations: [],
  currentId: null,
  view: null,
  editing: null, // id of the conversation being renamed or confirmed for deletion
  editMode: null,
  deleting: null, // id being deleted from this page: its socket's 4004 is expected
};

/** Set by chat.js: what a conversation's view may ask of the sidebar and the composer. */
export const hooks = {
  conversationGone: (_id) => {},
  conversationsChanged: () => {},
  composerError: (_message) => {},
  restoreDraft: (_text, _attachments) => {},
  selected: (_id) => {}, // a conversation (or none) is now shown
  shown: (_id, _sequence) => {}, // a conversation's view shows its events up to this sequence
  unread: (_id, _count) => {}, // the server says a conversation's unread count moved
  conversationChanged: (_conversation) => {}, // the server says a conversation's name or place moved
  attentionChanged: () => {}, // the needs-you list may have changed
};

// ---------------------------------------------------------------------------------------
// Notices

let noticeTimer = 0;
export function notify(message, { sticky = false } = {}) {
  ui.notice.textContent = message;
  ui.notice.hidden = !message;
  clearTimeout(noticeTimer);
  if (message && !sticky) noticeTimer = setTimeout(() => (ui.notice.hidden = true), 8000);
}

export function isAbort(error) {
  return error && error.name === "AbortError";
}

export function reportError(error) {
  if (isAbort(error) || (error instanceof ApiError && error.status === 401)) return;
  notify(error instanceof ApiError ? error.message : "Flarebot cannot be reached right now.");
}

// ---------------------------------------------------------------------------------------
// Scrolling: follow the answer while the owner is at the bottom; stop when they scroll up.

export const scroll = { stick: true };

export function nearBottom() {
  const t = ui.transcript;
  return t.scrollHeight - t.scrollTop - t.clientHeight < 48;
}

export function scrollToBottom() {
  ui.transcript.scrollTop = ui.transcript.scrollHeight;
}

/** Offer the way back down whenever the latest message is out of view. */
export function showToBottom() {
  ui.toBottom.hidden = nearBottom();
}

ui.transcript.addEventListener("scroll", () => {
  scroll.stick = nearBottom();
  showToBottom();
});

const UPWARD_KEYS = new Set(["ArrowUp", "PageUp", "Home"]);

/**
 * Call `stop` as soon as the owner starts scrolling `element` up (the wheel, or a key while
 * it has the focus), before the scroll event: following the end in between would cancel
 * their scroll.
 *
 * With `beforeScrolling`, the browser scrolls only after `stop` ran: a passive listener
 * lets the compositor start the wheel's scroll while the page is busy, and a line that
 * arrives before the listener runs puts the block back at its end. For a small block that
 * follows fast output; the transcript keeps a passive listener, so its wheel never waits.
 */
export function upwardIntent(element, stop, { beforeScrolling = false } = {}) {
  const wheel = (event) => {
    event.stopPropagation(); // an inner block's wheel is its own; a scroll it passes on says so
    if (event.deltaY < 0) stop();
  };
  element.addEventListener("wheel", wheel, { passive: !beforeScrolling });
  element.addEventListener("keydown", (event) => event.target === element && UPWARD_KEYS.has(event.key) && stop());
}
upwardIntent(ui.transcript, () => (scroll.stick = false));
ui.toBottom.addEventListener("click", () => {
  scroll.stick = true;
  scrollToBottom();
  ui.toBottom.hidden = true;
  ui.input.focus({ preventScroll: true });
});

// ---------------------------------------------------------------------------------------
// Connection state shown in the top bar

let connectionTimer = 0;
export function setConnection(connection) {
  clearTimeout(connectionTimer);
  ui.connection.dataset.state = connection;
  const labels = { reconnecting: "Reconnecting…", connecting: "Connecting…", offline: "Offline" };
  // A short blip is not worth a flicker.
  const show = () => (ui.connection.textContent = labels[connection] || "");
  if (connection === "live" || connection === "idle") show();
  else connectionTimer = setTimeout(show, connection === "offline" ? 0 : 600);
}
