// The sidebar: the conversation list (select, rename with a title the model suggests, delete;
// names and order other tabs changed), opening and closing it on
// narrow screens, and which conversation's view is shown.

import { api } from "./api.js";
import { ConversationView } from "./chat-view.js";
import { MAX_NAME, app, hooks, notify, reportError, setConnection, state, ui } from "./chat-shell.js";
import { button, el } from "./dom.js";
import { offerUndo } from "./chat-ask.js";

export function currentName() {
  const current = state.conversations.find((c) => c.id === state.currentId);
  return current ? current.name : "Flarebot";
}

let pendingDelete = null; // a deletion that can still be undone: {conversation, offer}

export function setConversations(conversations) {
  // A deletion waiting for its Undo is not shown, whatever the server still lists.
  const waiting = pendingDelete && pendingDelete.conversation.id;
  state.conversations = waiting ? conversations.filter((c) => c.id !== waiting) : conversations;
  renderSidebar();
}

export async function loadConversations() {
  const data = await api("/api/conversations/");
  setConversations(data.conversations);
  return data.conversations;
}

/**
 * The server's word on one conversation (a `conversation_changed` frame, from whichever tab
 * or device changed it): its name, and its place in the list, which is the server's order
 * (newest `updated_at` first, then by id). A conversation this page did not list yet joins it.
 */
export function conversationChanged(conversation) {
  if (!conversation || typeof conversation.id !== "string") return;
  const rest = state.conversations.filter((c) => c.id !== conversation.id);
  const after = (c) =>
    c.updated_at < conversation.updated_at || (c.updated_at === conversation.updated_at && c.id > conversation.id);
  const at = rest.findIndex(after);
  rest.splice(at < 0 ? rest.length : at, 0, conversation);
  setConversations(rest);
}

let refreshTimer = 0;
export function scheduleConversationsRefresh() {
  clearTimeout(refreshTimer);
  refreshTimer = setTimeout(() => loadConversations().catch(reportError), 400);
}

/** Which control of which row has focus, so that re-rendering the list can put it back. */
function sidebarFocus() {
  const active = document.activeElement;
  const row = active && ui.list.contains(active) ? active.closest("li") : null;
  const control = row && ["conversation-link", "rename", "delete"].find((name) => active.classList.contains(name));
  return control ? { id: row.dataset.conversationId, control } : null;
}

export function renderSidebar() {
  const focus = sidebarFocus();
  // A row kept as it is (an open rename or delete question) is the same node after the
  // re-render, but moving it drops its focus: give it back to the very element.
  const active = ui.list.contains(document.activeElement) ? document.activeElement : null;
  const items = state.conversations.map((conversation) => {
    if (state.editing === conversation.id) {
      // Keep the open rename field or delete question (and what was typed) as it is.
      const open = ui.list.querySelector(`li[data-conversation-id="${conversation.id}"]`);
      if (open && open.querySelector(state.editMode === "rename" ? ".rename-form" : ".delete-confirm")) return open;
    }
    const li = el("li", "conversation");
    li.dataset.conversationId = conversation.id;
    const current = conversation.id === state.currentId;
    if (state.editing === conversation.id && state.editMode === "rename") li.append(renameForm(conversation));
    else if (state.editing === conversation.id && state.editMode === "delete") li.append(deleteConfirm(conversation));
    else {
      const link = el("a", "conversation-link", conversation.name);
      link.href = `/?c=${conversation.id}`;
      link.title = conversation.name;
      if (current) link.setAttribute("aria-current", "page");
      link.addEventListener("click", (event) => {
        if (event.ctrlKey || event.metaKey || event.shiftKey || event.button !== 0) return;
        event.preventDefault();
        select(conversation.id);
      });
      li.append(link);
      if (conversation.unread > 0) li.append(unreadMark(conversation.unread));
      li.append(
        button("✎", "icon-button rename", () => startEdit(conversation.id, "rename"), `Rename ${conversation.name}`),
        button("×", "icon-button delete", () => startEdit(conversation.id, "delete"), `Delete ${conversation.name}`),
      );
    }
    li.classList.toggle("current", current);
    li.classList.toggle("unread", conversation.unread > 0);
    return li;
  });
  ui.list.replaceChildren(...items);
  if (active && ui.list.contains(active) && document.activeElement !== active) {
    active.focus({ preventScroll: true });
  } else if (focus && !ui.list.contains(document.activeElement)) {
    const again = ui.list.querySelector(`li[data-conversation-id="${focus.id}"] .${focus.control}`);
    if (again) again.focus({ preventScroll: true });
  }
  ui.listEmpty.hidden = state.conversations.length > 0;
  ui.title.textContent = currentName();
  // The total unread leads the title ("(3) Flarebot"), so a background tab shows it.
  const total = unreadTotal();
  const title = state.currentId ? `${currentName()} · Flarebot` : "Flarebot";
  document.title = total > 0 ? `(${total}) ${title}` : title;
  // Narrow screens hide the list: the menu button says that something in it is unread.
  const elsewhere = state.conversations.some((c) => c.unread > 0 && c.id !== state.currentId);
  ui.toggle.classList.toggle("has-unread", elsewhere);
}

export function unreadTotal() {
  return state.conversations.reduce((total, c) => total + (c.unread > 0 ? c.unread : 0), 0);
}

/** The count beside a conversation's name (outside its link, whose name stays the conversation's). */
function unreadMark(count) {
  const mark = el("span", "unread-count", count > 99 ? "99+" : String(count));
  mark.title = `${count} unread`;
  mark.append(el("span", "visually-hidden", " unread"));
  return mark;
}

function startEdit(id, mode) {
  state.editing = id;
  state.editMode = mode;
  renderSidebar();
  const li = ui.list.querySelector(`li[data-conversation-id="${id}"]`);
  const target = li && li.querySelector(mode === "rename" ? "input" : "button.cancel");
  if (target) {
    target.focus();
    if (mode === "rename") target.select();
  }
}

function endEdit(focusId) {
  state.editing = null;
  state.editMode = null;
  renderSidebar();
  const li = focusId && ui.list.querySelector(`li[data-conversation-id="${focusId}"] .conversation-link`);
  if (li) li.focus();
}

function renameForm(conversation) {
  const form = el("form", "rename-form");
  const input = el("input");
  input.value = conversation.name;
  input.maxLength = MAX_NAME;
  input.setAttribute("aria-label", "Conversation name");
  let done = false;
  const cancel = () => {
    done = true;
    endEdit(conversation.id);
  };
  const regenerate = button("↻", "regenerate-title", () => suggestTitle(conversation, input, regenerate));
  regenerate.setAttribute("aria-label", "Regenerate title");
  regenerate.title = "Regenerate title: the model suggests one";
  form.append(input, regenerate, el("button", "primary", "Save"), button("Cancel", "cancel", cancel));
  const submit = async () => {
    if (done) return;
    const name = input.value.trim();
    if (!name || name === conversation.name) return cancel();
    done = true;
    try {
      await api(`/api/conversations/${conversation.id}/`, { method: "PATCH", body: { name } });
      state.editing = null;
      await loadConversations();
      endEdit(conversation.id);
    } catch (error) {
      done = false;
      reportError(error);
      input.focus();
    }
  };
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    submit();
  });
  input.addEventListener("keydown", (event) => {
    if (event.key === "Escape") {
      event.preventDefault();
      cancel();
    }
  });
  form.addEventListener("focusout", (event) => {
    // Leaving the form (not moving between its fields) saves, like most inline editors.
    if (!form.contains(event.relatedTarget)) setTimeout(submit, 0);
  });
  return form;
}

/**
 * Regenerate: the model suggests a title (`POST .../title/`, nothing stored) and the box
 * shows it, for the owner to save or change. The button stays focusable while it waits
 * (a disabled one would drop the focus, and leaving the box saves it).
 */
async function suggestTitle(conversation, input, control) {
  if (control.getAttribute("aria-busy") === "true") return;
  control.setAttribute("aria-busy", "true");
  try {
    const { title } = await api(`/api/conversations/${conversation.id}/title/`, { method: "POST" });
    if (!input.isConnected) return; // the box was closed meanwhile
    input.value = title;
    input.focus();
    input.select();
  } catch (error) {
    reportError(error);
  } finally {
    control.removeAttribute("aria-busy");
  }
}

function deleteConfirm(conversation) {
  const box = el("div", "delete-confirm");
  box.setAttribute("role", "group");
  box.setAttribute("aria-label", `Delete ${conversation.name}?`);
  const question = el("span", "delete-question", `Delete “${conversation.name}”?`);
  const confirm = button("Delete", "danger confirm-delete", () => {
    confirm.disabled = true;
    state.editing = null;
    state.editMode = null;
    deleteWithUndo(conversation);
  });
  const cancel = button("Cancel", "cancel", () => endEdit(conversation.id));
  box.addEventListener("keydown", (event) => {
    if (event.key === "Escape") {
      event.preventDefault(); // this Escape is spent: it stops no answer and closes no sidebar
      endEdit(conversation.id);
    }
  });
  box.append(question, confirm, cancel);
  return box;
}

// A deletion waits behind its Undo bar (chat-ask.js) before it is sent, so the owner can take
// it back; leaving the page sends it at once (keepalive), as the owner confirmed it.

function deleteNow(conversation, { keepalive = false } = {}) {
  if (pendingDelete && pendingDelete.conversation === conversation) pendingDelete = null;
  const sent = api(`/api/conversations/${conversation.id}/`, { method: "DELETE", keepalive });
  if (!keepalive) sent.then(() => loadConversations(), reportError);
}

function deleteWithUndo(conversation) {
  if (pendingDelete) pendingDelete.offer.now(); // one undo at a time: the older one is final
  state.deleting = conversation.id;
  // What opens instead: the next one, else the one before, else a new chat.
  const ids = state.conversations.map((c) => c.id);
  const at = ids.indexOf(conversation.id);
  const neighbour = ids[at + 1] || ids[at - 1] || null;
  const wasCurrent = state.currentId === conversation.id;
  setConversations(state.conversations.filter((c) => c.id !== conversation.id));
  if (wasCurrent) select(neighbour, { push: false, keepSidebar: true });
  const link = neighbour && ui.list.querySelector(`li[data-conversation-id="${neighbour}"] .conversation-link`);
  (link || ui.newButton).focus();

  const offer = offerUndo({
    text: `Deleted “${conversation.name}”.`,
    undo: () => {
      pendingDelete = null;
      state.deleting = null;
      const rest = state.conversations;
      setConversations([...rest.slice(0, at), conversation, ...rest.slice(at)]);
      if (wasCurrent) select(conversation.id, { push: false, keepSidebar: true });
    },
    done: ({ keepalive }) => deleteNow(conversation, { keepalive }),
  });
  pendingDelete = { conversation, offer };
}

/** The conversation was deleted (here, elsewhere, or never existed): drop it and move on. */
export function conversationGone(id) {
  const wasCurrent = state.currentId === id;
  setConversations(state.conversations.filter((c) => c.id !== id));
  // Deleted from this page: its socket's 4004 may come first; the delete picks what opens next.
  if (wasCurrent && state.deleting !== id) {
    notify("That conversation no longer exists.");
    const next = state.conversations[0];
    select(next ? next.id : null, { push: false });
  }
}

export function select(id, { push = true, keepSidebar = false, message = null } = {}) {
  if (!keepSidebar) closeSidebar();
  if (state.view && state.view.id === id) {
    if (message) state.view.reveal(message);
    return;
  }
  if (state.view) state.view.dispose();
  state.view = null;
  state.currentId = id;
  const url = id ? `/?c=${id}` : "/";
  if (location.pathname + location.search !== url) history[push ? "pushState" : "replaceState"]({ c: id }, "", url);
  renderSidebar();
  ui.stop.hidden = true;
  hooks.composerError("");
  if (id) {
    ui.empty.hidden = true;
    state.view = new ConversationView(id);
    state.view.message = message;
    state.view.load();
  } else {
    ui.inner.replaceChildren();
    ui.empty.hidden = false;
    ui.toBottom.hidden = true;
    setConnection("idle");
  }
  hooks.selected(id);
}

/** Create a conversation for its first message; the server titles it from that message. */
export async function createConversation() {
  const conversation = await api("/api/conversations/", { method: "POST", body: {} });
  state.conversations = [conversation, ...state.conversations.filter((c) => c.id !== conversation.id)];
  select(conversation.id);
  return conversation;
}

// Narrow screens: the sidebar slides in over the page.

export function openSidebar() {
  app.classList.add("sidebar-open");
  ui.toggle.setAttribute("aria-expanded", "true");
  ui.backdrop.hidden = false;
  const target = ui.list.querySelector("[aria-current]") || ui.newButton;
  target.focus();
}

export function closeSidebar() {
  if (!app.classList.contains("sidebar-open")) return;
  app.classList.remove("sidebar-open");
  ui.toggle.setAttribute("aria-expanded", "false");
  ui.backdrop.hidden = true;
}

