// Unread counts (PROTOCOL.md `C.unread`): the server keeps the owner's read mark per
// conversation, so every tab and device agrees. This page moves the mark of the shown
// conversation up to the last event its view shows, while the tab is visible; the counts
// of the others arrive as `unread` frames on whichever socket is open, and the sidebar and
// the document title show them. Imports: chat.js -> this -> sidebar -> shell -> api.

import { api } from "./api.js";
import { state } from "./chat-shell.js";
import { loadConversations, renderSidebar, scheduleConversationsRefresh } from "./chat-sidebar.js";

const READ_AFTER_MS = 250; // a burst of events is marked once
const sent = new Map(); // conversation id -> the highest sequence this page marked read
let timer = 0;

const visible = () => document.visibilityState === "visible";

/** The server's count of a conversation (from a frame or an answer). */
export function unreadSet(id, count) {
  const conversation = state.conversations.find((c) => c.id === id);
  if (!conversation) {
    scheduleConversationsRefresh(); // one this page does not list yet
    return;
  }
  if (conversation.unread === count) return;
  conversation.unread = count;
  renderSidebar();
}

/** The shown conversation's view shows its events up to `sequence`: mark them read, if the owner can see them. */
export function unreadShown(id, sequence) {
  if (!visible() || !sequence || id !== state.currentId) return;
  const listed = state.conversations.find((c) => c.id === id);
  if ((sent.get(id) || 0) >= sequence && !(listed && listed.unread > 0)) return;
  clearTimeout(timer);
  timer = setTimeout(() => markRead(id, sequence), READ_AFTER_MS);
}

async function markRead(id, sequence) {
  if (!visible() || id !== state.currentId) return;
  sent.set(id, Math.max(sent.get(id) || 0, sequence));
  try {
    const conversation = await api(`/api/conversations/${id}/read/`, { method: "POST", body: { sequence } });
    unreadSet(id, conversation.unread);
  } catch {
    sent.delete(id); // tried again with the next event shown, or when the tab is shown again
  }
}

// A tab shown again: what its view shows is now seen, and counts may have moved while no
// socket of this page was open (a page without a conversation has none).
document.addEventListener("visibilitychange", () => {
  if (!visible()) return;
  loadConversations().catch(() => {});
  const view = state.view;
  if (view && view.loaded) unreadShown(view.id, view.lastSequence);
});
