// The owner's chat page: conversations in a sidebar, the selected one's transcript, a
// composer, and the conversation socket that streams answers in.
//
// Ordering rules (PROTOCOL.md): every durable event carries a gap-free per-conversation
// `sequence`; the page applies each sequence once (dropping anything at or below the last
// applied) and reconnects with `last_sequence` set to it, so a dropped socket resumes with
// no missing and no repeated text. Switching conversations disposes the old view: its
// socket is closed, its fetches aborted, and nothing it still receives is applied.

import { ApiError, api, toSignIn } from "./api.js";
import { renderMarkdown } from "./markdown.js";
import { ToolCard, renderSources, sourcesOf } from "./chat-tools.js";
import { BrowserTasks, TASK_ERROR_CODES } from "./chat-browser-tasks.js";

const app = document.getElementById("app");
const $ = (id) => document.getElementById(id);
// Limits come from the server (the template), never repeated here.
const MAX_CHARS = Number(app.dataset.maxChars);
const MAX_NAME = Number(app.dataset.maxName);
const RECONNECT_MIN_MS = 500;
const RECONNECT_MAX_MS = 10000;
const ACTIVE = new Set(["queued", "running"]);
const CLOSE_SESSION_EXPIRED = 4001;
const CLOSE_REFUSED = 4003;
const CLOSE_NOT_FOUND = 4004;
const OPEN_SETTLE_MS = 150;

const ui = {
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
};

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function button(text, className, onClick, label) {
  const node = el("button", className, text);
  node.type = "button";
  if (label) node.setAttribute("aria-label", label);
  node.addEventListener("click", onClick);
  return node;
}

// ---------------------------------------------------------------------------------------
// Notices

let noticeTimer = 0;
function notify(message, { sticky = false } = {}) {
  ui.notice.textContent = message;
  ui.notice.hidden = !message;
  clearTimeout(noticeTimer);
  if (message && !sticky) noticeTimer = setTimeout(() => (ui.notice.hidden = true), 8000);
}

function isAbort(error) {
  return error && error.name === "AbortError";
}

function reportError(error) {
  if (isAbort(error) || (error instanceof ApiError && error.status === 401)) return;
  notify(error instanceof ApiError ? error.message : "Flarebot cannot be reached right now.");
}

// ---------------------------------------------------------------------------------------
// One conversation's transcript and socket

class Turn {
  constructor(view, key) {
    this.view = view;
    this.key = key;
    this.id = null;
    this.status = null;
    this.error = null;
    this.el = el("article", "turn");
    this.userEl = null;
    this.assistantEl = null;
    this.partsEl = null;
    this.sourcesEl = null;
    this.noteEl = null;
    this.parts = []; // the assistant message's parts, as the transcript has them
    this.textEls = new Map(); // part index -> element of that text part
    this.cards = new Map(); // tool_call_id -> ToolCard
  }

  get active() {
    return ACTIVE.has(this.status);
  }

  setUser(message, { pending = false } = {}) {
    if (!this.userEl) {
      this.userEl = el("div", "msg user");
      this.el.prepend(this.userEl);
    }
    this.userEl.classList.toggle("pending", pending);
    const bubble = el("div", "bubble");
    bubble.textContent = textOf(message.parts);
    // A message a scheduled task sent for the owner says so (PROTOCOL.md addition: `source`).
    const source = (message.parts || []).find((p) => p.type === "text" && p.source && p.source.kind === "task")?.source;
    if (source) {
      this.userEl.dataset.source = "task";
      this.userEl.replaceChildren(el("div", "source", `Scheduled task: ${source.name || ""}`), bubble);
    } else {
      this.userEl.replaceChildren(bubble);
    }
    if (message.id) this.userEl.dataset.messageId = message.id;
  }

  ensureAssistant() {
    if (this.assistantEl) return;
    this.assistantEl = el("div", "msg assistant");
    this.partsEl = el("div", "parts");
    this.thinkingEl = el("div", "thinking");
    this.thinkingEl.setAttribute("aria-label", "Flarebot is answering");
    this.thinkingEl.append(el("span"), el("span"), el("span"));
    this.assistantEl.append(this.partsEl, this.thinkingEl);
    this.el.insertBefore(this.assistantEl, this.noteEl);
  }

  setAssistant(message) {
    this.ensureAssistant();
    if (message.id) this.assistantEl.dataset.messageId = message.id;
    this.setParts(message.parts || []);
  }

  setParts(parts) {
    this.ensureAssistant();
    this.parts = parts.map((part) => ({ ...part }));
    this.rebuild();
  }

  card(toolCallId) {
    let card = this.cards.get(toolCallId);
    if (!card) {
      card = new ToolCard(toolCallId);
      card.setTurnActive(this.active || this.status === null);
      const activity = this.view.activities.get(toolCallId);
      if (activity) card.setActivity(activity);
      this.cards.set(toolCallId, card);
    }
    return card;
  }

  /** Lay the parts out again (their set changed); text is re-rendered on the next frame. */
  rebuild() {
    const nodes = [];
    const shown = new Set();
    this.textEls.clear();
    this.parts.forEach((part, index) => {
      if (part.type === "text") {
        const node = el("div", "md");
        this.textEls.set(index, node);
        this.view.dirty.set(node, this);
        nodes.push(node);
      } else if (part.type === "tool" && part.tool_call_id) {
        const card = this.card(part.tool_call_id);
        card.setPart(part);
        shown.add(part.tool_call_id);
        nodes.push(card.el);
        // A proposed browser task's card follows the call that proposed it.
        const proposalId = part.name === "browser_task_propose" && part.output && part.output.proposal_id;
        if (typeof proposalId === "string") nodes.push(this.view.tasks.card(proposalId).el);
      }
    });
    // Activity announced before its tool part: show its card anyway.
    for (const [id, card] of this.cards) if (!shown.has(id) && card.activity) nodes.push(card.el);
    this.partsEl.replaceChildren(...nodes);
    this.renderSources();
    this.view.schedule();
    this.refresh();
  }

  /** Show the web sources of the turn's tool outputs as a compact list under the answer. */
  renderSources() {
    const list = renderSources(sourcesOf(this.parts));
    if (this.sourcesEl) this.sourcesEl.remove();
    this.sourcesEl = list;
    if (list) this.assistantEl.insertBefore(list, this.thinkingEl);
  }

  appendText(text) {
    this.ensureAssistant();
    const last = this.parts[this.parts.length - 1];
    if (last && last.type === "text") {
      last.text += text;
      this.view.dirty.set(this.textEls.get(this.parts.length - 1), this);
      this.view.schedule();
      this.refresh();
    } else {
      this.parts.push({ type: "text", text });
      this.rebuild();
    }
  }

  toolPart(toolCallId) {
    return this.parts.find((part) => part.type === "tool" && part.tool_call_id === toolCallId);
  }

  renderText(node) {
    for (const [index, textEl] of this.textEls) {
      if (textEl === node) node.replaceChildren(renderMarkdown(this.parts[index].text || ""));
    }
  }

  setStatus(status, error = null) {
    this.status = status;
    this.error = error;
    for (const card of this.cards.values()) card.setTurnActive(this.active);
    if (this.active) this.ensureAssistant();
    this.refresh();
  }

  /** Show the thinking dots and the closing note that fit the turn's status. */
  refresh() {
    if (this.assistantEl) {
      const visible = this.parts.some((p) => (p.type === "text" && p.text) || p.type === "tool") || this.cards.size;
      this.thinkingEl.hidden = !(this.active && !visible);
      this.assistantEl.hidden = !this.active && !visible;
    }
    let note = null;
    if (this.status === "failed") {
      note = el("div", "turn-note failed");
      note.setAttribute("role", "alert");
      const message = (this.error && this.error.message) || "This answer failed.";
      note.append(el("span", "", message));
      if (/settings/i.test(message)) {
        const link = el("a", "settings-link", "Open Settings");
        link.href = "/settings/";
        note.append(" ", link);
      }
      if (this.error && this.error.code) note.dataset.code = this.error.code;
    } else if (this.status === "cancelled") {
      note = el("div", "turn-note cancelled", "Stopped.");
    }
    if (note) note.dataset.turnId = this.id || "";
    if (this.noteEl) this.noteEl.remove();
    this.noteEl = note;
    if (note) this.el.append(note);
  }
}

function textOf(parts) {
  return (parts || [])
    .filter((part) => part.type === "text")
    .map((part) => part.text)
    .join("");
}

class ConversationView {
  constructor(id) {
    this.id = id;
    this.alive = true;
    this.abort = new AbortController();
    this.root = el("div", "transcript-view");
    this.root.dataset.conversationId = id;
    this.turns = new Map(); // turn id (or "request:<id>" before its ack) -> Turn
    this.pending = new Map(); // request_id -> {text, turn, viaSocket, acked}
    this.activities = new Map(); // tool_call_id -> A
    this.tasks = new BrowserTasks({
      send: (frame) => this.sendFrame(frame),
      startOverHttp: (proposalId) =>
        api(`/api/conversations/${this.id}/browser-tasks/`, {
          method: "POST",
          body: { proposal_id: proposalId },
          signal: this.abort.signal,
        }),
      onChange: () => this.changed(),
    });
    this.dirty = new Map(); // text part element -> its Turn, re-rendered on the next frame
    this.frame = 0;
    this.lastSequence = 0;
    this.socket = null;
    this.attempt = 0;
    this.retryTimer = 0;
    this.loaded = false;
    ui.inner.replaceChildren(this.root);
  }

  dispose() {
    this.alive = false;
    this.abort.abort();
    clearTimeout(this.retryTimer);
    cancelAnimationFrame(this.frame);
    this.closeSocket();
    this.root.remove();
  }

  async load() {
    setConnection("connecting");
    let snapshot;
    let activities = null;
    let taskList = null;
    try {
      const signal = this.abort.signal;
      const tolerated = (error) => {
        if (isAbort(error) || (error instanceof ApiError && error.status === 401)) throw error;
        return null; // tolerated: cards fall back to the transcript (and to events)
      };
      [snapshot, activities, taskList] = await Promise.all([
        api(`/api/conversations/${this.id}/messages/`, { signal }),
        api(`/api/conversations/${this.id}/activities/`, { signal }).catch(tolerated),
        api(`/api/conversations/${this.id}/browser-tasks/`, { signal }).catch(tolerated),
      ]);
    } catch (error) {
      if (!this.alive) return;
      if (error instanceof ApiError && error.status === 404) {
        conversationGone(this.id);
        return;
      }
      reportError(error);
      this.scheduleReconnect();
      return;
    }
    if (!this.alive) return;
    this.applySnapshot(snapshot, activities, taskList);
    this.connect();
  }

  applySnapshot(snapshot, activities, taskList) {
    this.turns.clear();
    this.root.replaceChildren();
    this.dirty.clear();
    this.activities.clear();
    for (const activity of (activities && activities.activities) || []) {
      if (!this.activities.has(activity.tool_call_id)) this.activities.set(activity.tool_call_id, activity);
    }
    this.tasks.reset();
    // Events after the messages' mark that the list already holds are skipped by the cards.
    if (taskList) this.tasks.applyList(taskList, this.activities);
    const states = new Map(((snapshot && snapshot.turns) || []).map((turn) => [turn.id, turn]));
    for (const message of snapshot.messages || []) {
      const turn = this.turnFor(message.turn_id || `message:${message.id}`);
      if (message.role === "user") turn.setUser(message);
      else turn.setAssistant(message);
    }
    for (const [id, info] of states) {
      const turn = this.turns.get(id) || (ACTIVE.has(info.status) ? this.turnFor(id) : null);
      if (turn) turn.setStatus(info.status, info.error || null);
    }
    for (const turn of this.turns.values()) if (turn.status === null) turn.setStatus("completed");
    // Messages sent before this snapshot: one the snapshot holds is shown from it; one it
    // does not hold yet stays on screen until its turn.queued event arrives.
    for (const [requestId, pending] of this.pending) {
      if (pending.turnId && this.turns.has(pending.turnId)) {
        this.pending.delete(requestId);
        continue;
      }
      this.turns.set(pending.turn.key, pending.turn);
      this.root.append(pending.turn.el);
    }
    this.lastSequence = Number(snapshot.last_sequence) || 0;
    this.placeTaskCards();
    this.loaded = true;
    stick = true;
    this.flush();
    this.changed();
    const linked = location.hash.startsWith("#turn-") ? document.getElementById(location.hash.slice(1)) : null;
    if (linked) {
      stick = false;
      linked.scrollIntoView({ block: "start" });
      linked.classList.add("linked");
    }
    document.body.dataset.ready = "1"; // the transcript is on screen (bench/pages.py waits for it)
  }

  turnFor(key) {
    let turn = this.turns.get(key);
    if (!turn) {
      turn = new Turn(this, key);
      turn.id = key.startsWith("request:") || key.startsWith("message:") ? null : key;
      if (turn.id) turn.el.id = `turn-${turn.id}`; // a task run's link lands here
      this.turns.set(key, turn);
      this.root.append(turn.el);
    }
    return turn;
  }

  // --- socket -------------------------------------------------------------------------

  connect() {
    if (!this.alive) return;
    this.closeSocket();
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    const url = `${scheme}//${location.host}/ws/conversations/${this.id}/?last_sequence=${this.lastSequence}`;
    const socket = new WebSocket(url);
    this.socket = socket;
    let settling = 0;
    socket.onopen = () => {
      // A refused socket is accepted and closed at once with its code (4001, 4003, 4004):
      // call it live, and send again, only once it stayed open for a moment.
      settling = setTimeout(() => {
        if (socket !== this.socket || socket.readyState !== WebSocket.OPEN) return;
        this.attempt = 0;
        setConnection("live");
        // A message sent before a drop may never have been stored: send it again; the
        // request_id makes a repeat return the same turn.
        for (const [requestId, pending] of this.pending) {
          if (!pending.acked) this.sendFrame({ type: "user_message", request_id: requestId, text: pending.text });
        }
      }, OPEN_SETTLE_MS);
    };
    socket.onmessage = (message) => {
      if (socket !== this.socket || !this.alive) return;
      let frame;
      try {
        frame = JSON.parse(message.data);
      } catch {
        return;
      }
      this.onFrame(frame);
    };
    socket.onclose = (event) => {
      clearTimeout(settling);
      if (socket !== this.socket || !this.alive) return;
      this.socket = null;
      if (event.code === CLOSE_SESSION_EXPIRED) return toSignIn();
      if (event.code === CLOSE_NOT_FOUND) return conversationGone(this.id);
      if (event.code === CLOSE_REFUSED) {
        notify("The server refused this connection. Reload the page to try again.", { sticky: true });
        setConnection("offline");
        return;
      }
      // Any other close (the network, a restart of the server): the codes above say when
      // the session or the conversation is gone, so just try again, backing off.
      this.scheduleReconnect();
    };
  }

  closeSocket() {
    const socket = this.socket;
    this.socket = null;
    if (socket) {
      socket.onopen = socket.onmessage = socket.onclose = socket.onerror = null;
      try {
        socket.close(1000);
      } catch {
        /* already closed */
      }
    }
  }

  scheduleReconnect() {
    if (!this.alive) return;
    setConnection("reconnecting");
    const base = Math.min(RECONNECT_MAX_MS, RECONNECT_MIN_MS * 2 ** this.attempt);
    const delay = base * (0.75 + Math.random() * 0.5);
    this.attempt += 1;
    clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => this.retry(), delay);
  }

  retry() {
    if (!this.alive) return;
    if (this.loaded) this.connect();
    else this.load();
  }

  /** Reconnect at once if a retry is waiting (the network came back, the tab is visible). */
  nudge() {
    if (this.alive && !this.socket && this.retryTimer) {
      clearTimeout(this.retryTimer);
      this.attempt = 0;
      this.retry();
    }
  }

  sendFrame(frame) {
    if (this.socket && this.socket.readyState === WebSocket.OPEN) {
      this.socket.send(JSON.stringify(frame));
      return true;
    }
    return false;
  }

  // --- frames and events --------------------------------------------------------------

  onFrame(frame) {
    if (frame.type === "event") this.onEvent(frame);
    else if (frame.type === "ack") this.onAck(frame.request_id, frame.turn_id);
    else if (frame.type === "error") this.onErrorFrame(frame);
    else if (frame.type === "frame") this.tasks.onPicture(frame);
  }

  onAck(requestId, turnId) {
    const pending = this.pending.get(requestId);
    if (!pending || pending.acked) return;
    pending.acked = true;
    pending.turnId = turnId;
    pending.turn = this.adopt(pending.turn, turnId);
    // The message moved the conversation to the top and may have titled it (the server's rule).
    scheduleConversationsRefresh();
  }

  /** Give an optimistic turn its id, unless that turn already arrived through an event. */
  adopt(turn, turnId) {
    const existing = this.turns.get(turnId);
    if (existing && existing !== turn) {
      turn.el.remove();
      this.turns.delete(turn.key);
      return existing;
    }
    this.turns.delete(turn.key);
    turn.key = turnId;
    turn.id = turnId;
    turn.el.id = `turn-${turnId}`;
    this.turns.set(turnId, turn);
    return turn;
  }

  onErrorFrame(frame) {
    if (TASK_ERROR_CODES.has(frame.code)) {
      this.tasks.onError(frame);
      return;
    }
    // The socket answers frames in order: an error answers the oldest unanswered message.
    const entry = [...this.pending].find(([, p]) => p.viaSocket && !p.acked);
    if (entry) this.dropPending(entry[0]);
    showComposerError(frame.message || "That did not work.");
  }

  dropPending(requestId) {
    const pending = this.pending.get(requestId);
    if (!pending) return;
    this.pending.delete(requestId);
    pending.turn.el.remove();
    this.turns.delete(pending.turn.key);
    if (!ui.input.value) {
      ui.input.value = pending.text;
      composerChanged();
    }
    this.changed();
  }

  onEvent(frame) {
    const sequence = Number(frame.sequence);
    if (!Number.isInteger(sequence) || sequence <= this.lastSequence) return; // seen already
    if (sequence > this.lastSequence + 1) {
      // Never expected (the server replays without gaps); start over from the transcript.
      this.resync();
      return;
    }
    this.lastSequence = sequence;
    if (this.tasks.onEvent(frame)) {
      this.placeTaskCards();
      this.changed();
      return;
    }
    const data = frame.data || {};
    const turnId = frame.turn_id;
    if (!turnId && frame.event !== "activity.updated") return; // not about a turn: nothing to show yet
    switch (frame.event) {
      case "turn.queued": {
        const pending = data.request_id ? this.pending.get(data.request_id) : null;
        let turn;
        if (pending) {
          this.pending.delete(data.request_id);
          turn = this.adopt(pending.turn, turnId);
        } else {
          turn = this.turnFor(turnId);
        }
        if (data.message) turn.setUser(data.message);
        turn.setStatus("queued");
        scheduleConversationsRefresh();
        break;
      }
      case "turn.started":
        this.turnFor(turnId).setStatus("running");
        break;
      case "text.delta": {
        const turn = this.turnFor(turnId);
        if (turn.assistantEl && data.message_id) turn.assistantEl.dataset.messageId = data.message_id;
        turn.appendText(String(data.text || ""));
        break;
      }
      case "message.replaced":
        this.turnFor(turnId).setParts(Array.isArray(data.parts) ? data.parts : []);
        break;
      case "tool.started": {
        const turn = this.turnFor(turnId);
        turn.ensureAssistant();
        if (!turn.toolPart(data.tool_call_id)) {
          turn.parts.push({
            type: "tool",
            tool_call_id: data.tool_call_id,
            name: data.name,
            input: data.input,
            output: null,
          });
          turn.rebuild();
        }
        break;
      }
      case "tool.progress":
        this.turnFor(turnId).card(data.tool_call_id).setProgress(data.progress || null);
        break;
      case "tool.finished": {
        const turn = this.turnFor(turnId);
        const part = turn.toolPart(data.tool_call_id);
        if (part) {
          part.output = data.output;
          part.status = data.status;
          turn.card(data.tool_call_id).setPart(part);
          turn.renderSources();
        }
        break;
      }
      case "activity.updated": {
        const activity = data.activity;
        if (!activity || !activity.tool_call_id) break;
        this.activities.set(activity.tool_call_id, activity);
        if (!activity.turn_id && !turnId) break;
        const turn = this.turnFor(activity.turn_id || turnId);
        const known = turn.cards.has(activity.tool_call_id);
        turn.card(activity.tool_call_id).setActivity(activity);
        if (!known) {
          turn.ensureAssistant();
          turn.rebuild();
        }
        break;
      }
      case "turn.completed":
        this.turnFor(turnId).setStatus("completed");
        break;
      case "turn.failed":
        this.turnFor(turnId).setStatus("failed", { code: data.code, message: data.message });
        break;
      case "turn.cancelled":
        this.turnFor(turnId).setStatus("cancelled");
        break;
      default:
        break; // kinds this page does not show (yet)
    }
    this.schedule();
    this.changed();
  }

  /** Show every task card: in the turn that proposed it, else at the end of the transcript. */
  placeTaskCards() {
    for (const card of this.tasks.cards.values()) if (!card.el.isConnected) this.root.append(card.el);
  }

  resync() {
    this.closeSocket();
    this.loaded = false;
    this.load();
  }

  // --- rendering ----------------------------------------------------------------------

  schedule() {
    if (!this.frame && this.alive) this.frame = requestAnimationFrame(() => this.flush());
  }

  /** Render the text parts that changed since the last frame, then keep the bottom in view. */
  flush() {
    cancelAnimationFrame(this.frame);
    this.frame = 0;
    if (!this.alive) return;
    const dirty = [...this.dirty];
    this.dirty.clear();
    for (const [node, turn] of dirty) if (node && node.isConnected) turn.renderText(node);
    if (stick) scrollToBottom();
  }

  /** The set of turns or their states changed: update the controls that depend on them. */
  changed() {
    if (!this.alive) return;
    const active = [...this.turns.values()].some((turn) => turn.active) || this.tasks.unfinished;
    ui.stop.hidden = !active;
    ui.empty.hidden = !this.loaded || this.turns.size > 0 || this.pending.size > 0;
    ui.transcript.setAttribute("aria-busy", String(active));
  }

  // --- actions ------------------------------------------------------------------------

  async send(text) {
    const requestId = crypto.randomUUID();
    const turn = this.turnFor(`request:${requestId}`);
    turn.setUser({ parts: [{ type: "text", text }] }, { pending: true });
    turn.setStatus("queued");
    const pending = { text, turn, viaSocket: false, acked: false, turnId: null };
    this.pending.set(requestId, pending);
    stick = true;
    this.schedule();
    this.changed();
    if (this.sendFrame({ type: "user_message", request_id: requestId, text })) {
      pending.viaSocket = true;
      return;
    }
    // No socket right now: hand the message over HTTP; its events arrive once reconnected.
    try {
      const result = await api(`/api/conversations/${this.id}/messages/`, {
        method: "POST",
        body: { request_id: requestId, text },
        signal: this.abort.signal,
      });
      if (this.alive) this.onAck(requestId, result.turn_id);
    } catch (error) {
      if (!this.alive || isAbort(error)) return;
      if (error instanceof ApiError && error.status === 404) return conversationGone(this.id);
      this.dropPending(requestId);
      showComposerError(error instanceof ApiError ? error.message : "Flarebot cannot be reached right now.");
    }
  }

  async cancel() {
    if (this.sendFrame({ type: "cancel_agent" })) return;
    // Over HTTP, the agent's cancel stops the active turn and the unfinished browser task.
    try {
      await api("/api/agent/", { method: "DELETE", body: { session_id: this.id }, signal: this.abort.signal });
    } catch (error) {
      if (this.alive && !(error instanceof ApiError && error.status === 404)) reportError(error);
    }
  }
}

// ---------------------------------------------------------------------------------------
// Scrolling: follow the answer while the owner is at the bottom; stop when they scroll up.

let stick = true;
function nearBottom() {
  const t = ui.transcript;
  return t.scrollHeight - t.scrollTop - t.clientHeight < 48;
}
function scrollToBottom() {
  ui.transcript.scrollTop = ui.transcript.scrollHeight;
}
ui.transcript.addEventListener("scroll", () => {
  stick = nearBottom();
});

// ---------------------------------------------------------------------------------------
// Connection state shown in the top bar

let connectionTimer = 0;
function setConnection(state) {
  clearTimeout(connectionTimer);
  ui.connection.dataset.state = state;
  const labels = { reconnecting: "Reconnecting…", connecting: "Connecting…", offline: "Offline" };
  // A short blip is not worth a flicker.
  const show = () => (ui.connection.textContent = labels[state] || "");
  if (state === "live" || state === "idle") show();
  else connectionTimer = setTimeout(show, state === "offline" ? 0 : 600);
}

// ---------------------------------------------------------------------------------------
// Conversations and the sidebar

const state = {
  conversations: [],
  currentId: null,
  view: null,
  editing: null, // id of the conversation being renamed or confirmed for deletion
  editMode: null,
  deleting: null, // id being deleted from this page: its socket's 4004 is expected
};

function currentName() {
  const current = state.conversations.find((c) => c.id === state.currentId);
  return current ? current.name : "Flarebot";
}

function setConversations(conversations) {
  state.conversations = conversations;
  renderSidebar();
}

async function loadConversations() {
  const data = await api("/api/conversations/");
  setConversations(data.conversations);
  return data.conversations;
}

let refreshTimer = 0;
function scheduleConversationsRefresh() {
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

function renderSidebar() {
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
      li.append(
        link,
        button("✎", "icon-button rename", () => startEdit(conversation.id, "rename"), `Rename ${conversation.name}`),
        button("×", "icon-button delete", () => startEdit(conversation.id, "delete"), `Delete ${conversation.name}`),
      );
    }
    li.classList.toggle("current", current);
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
  document.title = state.currentId ? `${currentName()} · Flarebot` : "Flarebot";
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
  form.append(input, el("button", "primary", "Save"), button("Cancel", "cancel", cancel));
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

function deleteConfirm(conversation) {
  const box = el("div", "delete-confirm");
  box.setAttribute("role", "group");
  box.setAttribute("aria-label", `Delete ${conversation.name}?`);
  const question = el("span", "delete-question", `Delete “${conversation.name}”?`);
  const confirm = button("Delete", "danger confirm-delete", async () => {
    confirm.disabled = true;
    state.deleting = conversation.id;
    // Focus goes where the row was: the next one, else the one before, else New chat.
    const ids = state.conversations.map((c) => c.id);
    const at = ids.indexOf(conversation.id);
    const neighbour = ids[at + 1] || ids[at - 1] || null;
    const wasCurrent = state.currentId === conversation.id;
    try {
      await api(`/api/conversations/${conversation.id}/`, { method: "DELETE" });
      state.editing = null;
      state.editMode = null;
      setConversations(state.conversations.filter((c) => c.id !== conversation.id));
      if (wasCurrent) select(neighbour, { push: false, keepSidebar: true });
      const link = neighbour && ui.list.querySelector(`li[data-conversation-id="${neighbour}"] .conversation-link`);
      (link || ui.newButton).focus();
      await loadConversations();
    } catch (error) {
      confirm.disabled = false;
      reportError(error);
    }
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

/** The conversation was deleted (here, elsewhere, or never existed): drop it and move on. */
function conversationGone(id) {
  const wasCurrent = state.currentId === id;
  setConversations(state.conversations.filter((c) => c.id !== id));
  // Deleted from this page: its socket's 4004 may come first; the delete picks what opens next.
  if (wasCurrent && state.deleting !== id) {
    notify("That conversation no longer exists.");
    const next = state.conversations[0];
    select(next ? next.id : null, { push: false });
  }
}

function select(id, { push = true, keepSidebar = false } = {}) {
  if (!keepSidebar) closeSidebar();
  if (state.view && state.view.id === id) return;
  if (state.view) state.view.dispose();
  state.view = null;
  state.currentId = id;
  const url = id ? `/?c=${id}` : "/";
  if (location.pathname + location.search !== url) history[push ? "pushState" : "replaceState"]({ c: id }, "", url);
  renderSidebar();
  ui.stop.hidden = true;
  hideComposerError();
  if (id) {
    ui.empty.hidden = true;
    state.view = new ConversationView(id);
    state.view.load();
  } else {
    ui.inner.replaceChildren();
    ui.empty.hidden = false;
    setConnection("idle");
  }
}

/** Create a conversation for its first message; the server titles it from that message. */
async function createConversation() {
  const conversation = await api("/api/conversations/", { method: "POST", body: {} });
  state.conversations = [conversation, ...state.conversations.filter((c) => c.id !== conversation.id)];
  select(conversation.id);
  return conversation;
}

// ---------------------------------------------------------------------------------------
// Composer

function showComposerError(message) {
  ui.error.textContent = message;
  ui.error.hidden = false;
}

function hideComposerError() {
  ui.error.hidden = true;
  ui.error.textContent = "";
}

function autosize() {
  ui.input.style.height = "auto";
  ui.input.style.height = `${Math.min(ui.input.scrollHeight, window.innerHeight * 0.4)}px`;
}

function composerChanged() {
  autosize();
  const length = ui.input.value.length; // UTF-16 code units, as the server counts
  const over = length > MAX_CHARS;
  ui.count.hidden = length < MAX_CHARS * 0.9;
  ui.count.textContent = `${length.toLocaleString("en")} / ${MAX_CHARS.toLocaleString("en")}`;
  ui.count.classList.toggle("over", over);
  ui.input.setAttribute("aria-invalid", String(over));
  if (over) showComposerError(tooLongMessage(length));
  else if (ui.error.dataset.kind === "length") hideComposerError();
  ui.error.dataset.kind = over ? "length" : "";
}

function tooLongMessage(length) {
  const extra = (length - MAX_CHARS).toLocaleString("en");
  return `This message is too long: at most ${MAX_CHARS.toLocaleString("en")} characters (${extra} over).`;
}

/** Drop surrounding blank lines and trailing spaces; indentation of the first line stays. */
function cleanText(text) {
  return text.replace(/^(?:[ \t]*\n)+/, "").trimEnd();
}

let creating = false;
async function submitComposer() {
  const text = cleanText(ui.input.value);
  if (!text) return;
  if (text.length > MAX_CHARS) {
    showComposerError(tooLongMessage(text.length));
    ui.error.dataset.kind = "length";
    return;
  }
  hideComposerError();
  if (!state.view) {
    if (creating) return;
    creating = true;
    try {
      await createConversation();
    } catch (error) {
      reportError(error);
      return;
    } finally {
      creating = false;
    }
  }
  ui.input.value = "";
  composerChanged();
  state.view.send(text);
}

ui.composer.addEventListener("submit", (event) => {
  event.preventDefault();
  submitComposer();
});
ui.input.addEventListener("input", composerChanged);
ui.input.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.altKey && !event.ctrlKey && !event.metaKey) {
    if (event.isComposing || event.keyCode === 229) return; // an input method is composing
    event.preventDefault();
    submitComposer();
  }
});
ui.stop.addEventListener("click", () => state.view && state.view.cancel());

// ---------------------------------------------------------------------------------------
// Sidebar toggle (narrow screens)

function openSidebar() {
  app.classList.add("sidebar-open");
  ui.toggle.setAttribute("aria-expanded", "true");
  ui.backdrop.hidden = false;
  const target = ui.list.querySelector("[aria-current]") || ui.newButton;
  target.focus();
}

function closeSidebar() {
  if (!app.classList.contains("sidebar-open")) return;
  app.classList.remove("sidebar-open");
  ui.toggle.setAttribute("aria-expanded", "false");
  ui.backdrop.hidden = true;
}

ui.toggle.addEventListener("click", () => {
  if (app.classList.contains("sidebar-open")) closeSidebar();
  else openSidebar();
});
ui.backdrop.addEventListener("click", closeSidebar);
// Escape undoes one thing at a time: a rename or delete question (their own handlers spend
// it), then an open sidebar, then a streaming answer (as Stop does).
document.addEventListener("keydown", (event) => {
  if (event.key !== "Escape" || event.defaultPrevented || event.isComposing) return;
  if (app.classList.contains("sidebar-open")) {
    event.preventDefault();
    closeSidebar();
    ui.toggle.focus();
  } else if (state.view && !ui.stop.hidden) {
    event.preventDefault();
    state.view.cancel();
  }
});

// A conversation comes to exist with its first message: New chat only clears the view.
ui.newButton.addEventListener("click", () => {
  select(null);
  ui.input.value = "";
  composerChanged();
  ui.input.focus();
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
  let conversations;
  try {
    conversations = await loadConversations();
  } catch (error) {
    reportError(error);
    setTimeout(start, 3000);
    return;
  }
  const wanted = requestedId();
  const chosen = conversations.find((c) => c.id === wanted) || conversations[0];
  if (wanted && !conversations.some((c) => c.id === wanted)) notify("That conversation no longer exists.");
  select(chosen ? chosen.id : null, { push: false });
  composerChanged();
  ui.input.focus();
  if (!chosen) document.body.dataset.ready = "1";
}

start();
