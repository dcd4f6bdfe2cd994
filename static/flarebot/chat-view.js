// One conversation's view: it loads the transcript, keeps a turn on screen for each turn
// of the conversation, and applies the socket's events to them (chat-stream.js). Switching
// conversations disposes the old view: its socket is closed, its fetches aborted, and
// nothing it still receives is applied.

import { ApiError, api } from "./api.js";
import { ask } from "./chat-ask.js";
import { BrowserTasks } from "./chat-browser-tasks.js";
import {
  ACTIVE,
  hooks,
  isAbort,
  reportError,
  scroll,
  scrollToBottom,
  setConnection,
  showToBottom,
  ui,
} from "./chat-shell.js";
import { el } from "./dom.js";
import { EventStream } from "./chat-stream.js";
import { Turn, fillTimes } from "./chat-turn.js";
import { markdownReady } from "./markdown.js";

// A long transcript shows its latest answers first: the last FIRST_SCREEN text parts are
// rendered before the page counts as shown, older ones BACKLOG_CHUNK at a time in the
// tasks that follow, keeping what is on screen where it is.
const FIRST_SCREEN = 12;
const BACKLOG_CHUNK = 16;
const STOP_TASK = "Stop the task? Its steps are kept.";

/** The body of a message sent: its text, and its files' ids when it has any. */
function messageBody(requestId, pending) {
  const body = { request_id: requestId, text: pending.text };
  if (pending.attachments.length) body.attachments = pending.attachments.map((part) => part.id);
  return body;
}


export class ConversationView extends EventStream {
  constructor(id) {
    super();
    this.id = id;
    this.abort = new AbortController();
    this.root = el("div", "transcript-view");
    this.root.dataset.conversationId = id;
    this.turns = new Map(); // turn id (or "request:<id>" before its ack) -> Turn
    this.pending = new Map(); // request_id -> {text, attachments, turn, viaSocket} until stored
    this.activities = new Map(); // tool_call_id -> A
    this.tasks = new BrowserTasks({
      send: (frame) => this.sendFrame(frame),
      sendSoon: (frame) => this.sendSoon(frame),
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
    this.backlogTimer = 0;
    this.loaded = false;
    this.message = null; // a message to bring into view once loaded (a search result)
    this.hidden = null; // what a clear waiting for its Undo hides (chat-header.js): its nodes
    this.root.addEventListener("flarebot:write-proposal", (event) => this.decideProposal(event.detail));
    this.root.addEventListener("flarebot:output-gap", (event) => this.refreshOutput(event.detail.card));
    ui.inner.replaceChildren(this.root);
  }

  /**
   * A card missed a piece of its running call's output: the page read the stored cards a
   * moment before the transcript, and the events after the transcript's mark start later.
   * The stored card has all of it now.
   */
  async refreshOutput(card) {
    try {
      const page = await api(`/api/conversations/${this.id}/activities/`, { signal: this.abort.signal });
      const stored = (page.activities || []).find((activity) => activity.tool_call_id === card.toolCallId);
      if (stored && this.alive) card.setActivity(stored);
    } catch (error) {
      if (!isAbort(error)) reportError(error);
    }
  }

  /** The owner's Confirm or Dismiss of a proposed write; the event that follows updates every tab. */
  async decideProposal({ proposalId, decision, said }) {
    try {
      await api(`/api/conversations/${this.id}/write-proposals/${proposalId}/`, {
        method: "POST",
        body: { decision },
        signal: this.abort.signal,
      });
    } catch (error) {
      if (isAbort(error)) return;
      said.textContent = error instanceof ApiError ? error.message : "Flarebot could not be reached; try again.";
      said.dataset.kind = "error";
      for (const button of said.parentElement?.querySelectorAll("button") || []) button.disabled = false;
    }
  }

  dispose() {
    this.alive = false;
    this.abort.abort();
    clearTimeout(this.retryTimer);
    cancelAnimationFrame(this.frame);
    clearTimeout(this.backlogTimer);
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
        markdownReady(),
      ]);
    } catch (error) {
      if (!this.alive) return;
      if (error instanceof ApiError && error.status === 404) {
        hooks.conversationGone(this.id);
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
    this.hidden = null; // what a clear hid is gone, or (its Undo taken) shown again as the server has it
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
      if (!turn) continue;
      turn.setAnswerVersions(info.answer_versions);
      turn.setStatus(info.status, info.error || null);
    }
    for (const turn of this.turns.values()) if (turn.status === null) turn.setStatus("completed");
    // Messages sent but not acknowledged yet stay on screen until their ack or turn.queued
    // event (one the snapshot already holds shows twice until then: stored() settles it).
    for (const pending of this.pending.values()) {
      this.turns.set(pending.turn.key, pending.turn);
      this.root.append(pending.turn.el);
    }
    this.lastSequence = Number(snapshot.last_sequence) || 0;
    this.placeTaskCards();
    this.loaded = true;
    scroll.stick = true;
    const linked = /^#(turn|browser-task)-/.test(location.hash) ? document.getElementById(location.hash.slice(1)) : null;
    // A turn to show (a link, a search result) needs everything above it laid out first.
    this.flush(linked || this.message ? Infinity : FIRST_SCREEN);
    this.changed();
    if (linked) {
      scroll.stick = false;
      linked.scrollIntoView({ block: "start" });
      linked.classList.add("linked");
    }
    if (this.message) this.reveal(this.message);
    document.body.dataset.ready = "1"; // the transcript is on screen (bench/pages.py waits for it)
    requestIdleCallback(() => this.alive && fillTimes(this.root), { timeout: 1000 });
  }

  /** Bring a message (a search result) into view and mark its turn. */
  reveal(messageId) {
    this.message = messageId;
    if (!this.loaded) return;
    this.message = null;
    const node = this.root.querySelector(`[data-message-id="${CSS.escape(messageId)}"]`);
    if (!node) return;
    scroll.stick = false;
    for (const old of this.root.querySelectorAll(".turn.linked")) old.classList.remove("linked");
    for (const old of this.root.querySelectorAll(".msg.found")) old.classList.remove("found");
    node.closest(".turn").classList.add("linked");
    node.classList.add("found"); // the message the search matched, marked until another is
    node.scrollIntoView({ block: "center" });
    showToBottom();
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

  /** Take back a message the server refused: its turn goes, its text returns to the composer. */
  dropPending(requestId) {
    const pending = this.pending.get(requestId);
    if (!pending) return;
    this.pending.delete(requestId);
    pending.turn.el.remove();
    this.turns.delete(pending.turn.key);
    hooks.restoreDraft(pending.text, pending.attachments);
    this.changed();
  }

  /** Show every task card: in the turn that proposed it, else at the end of the transcript. */
  placeTaskCards() {
    for (const card of this.tasks.cards.values()) if (!card.el.isConnected) this.root.append(card.el);
  }

  // --- rendering ----------------------------------------------------------------------

  schedule() {
    if (!this.frame && this.alive) this.frame = requestAnimationFrame(() => this.flush());
  }

  /** Render the last `limit` text parts that changed, then keep the bottom in view. */
  flush(limit = Infinity) {
    cancelAnimationFrame(this.frame);
    this.frame = 0;
    clearTimeout(this.backlogTimer);
    this.backlogTimer = 0;
    if (!this.alive) return;
    this.renderLast(limit);
    if (scroll.stick) scrollToBottom();
    showToBottom();
    if (this.dirty.size) this.backlogTimer = setTimeout(() => this.renderBacklog(), 0);
  }

  renderLast(limit) {
    const dirty = [...this.dirty];
    const now = dirty.slice(Math.max(0, dirty.length - limit));
    for (const [node] of now) this.dirty.delete(node);
    for (const [node, turn] of now) if (node && node.isConnected) turn.renderText(node);
  }

  /** Render older text parts a chunk at a time; what is on screen stays where it is. */
  renderBacklog() {
    this.backlogTimer = 0;
    if (!this.alive || !this.dirty.size) return;
    const transcript = ui.transcript;
    const before = transcript.scrollHeight;
    this.renderLast(BACKLOG_CHUNK);
    if (scroll.stick) scrollToBottom();
    else transcript.scrollTop += transcript.scrollHeight - before; // it all went in above
    showToBottom();
    if (this.dirty.size) this.backlogTimer = setTimeout(() => this.renderBacklog(), 0);
  }

  /**
   * Hide the history a clear will remove while its Undo lasts (what comes meanwhile shows), or
   * show it again. The clear's `conversation.cleared` event loads the transcript anew.
   */
  hideHistory(hide) {
    for (const node of this.hidden || []) node.hidden = false;
    this.hidden = hide ? [...this.root.children].filter((node) => !node.hidden) : null;
    for (const node of this.hidden || []) node.hidden = true;
    this.changed();
  }

  /** The set of turns or their states changed: update the controls that depend on them. */
  changed() {
    if (!this.alive) return;
    if (this.loaded) hooks.shown(this.id, this.lastSequence); // the owner's read mark follows what is shown
    const active = [...this.turns.values()].some((turn) => turn.active) || this.tasks.unfinished;
    ui.stop.hidden = !active;
    const shown = this.hidden
      ? [...this.root.children].some((node) => !node.hidden)
      : this.turns.size > 0 || this.pending.size > 0;
    ui.empty.hidden = !this.loaded || shown;
    ui.transcript.setAttribute("aria-busy", String(active));
    // Edit, Regenerate and the versions act only while nothing runs, Retry on the last turn.
    this.root.classList.toggle("busy", active);
    const last = this.root.querySelector("article.turn:last-of-type");
    if (last !== this.lastTurnEl) {
      if (this.lastTurnEl) this.lastTurnEl.classList.remove("last");
      if (last) last.classList.add("last");
      this.lastTurnEl = last;
    }
  }

  // --- actions ------------------------------------------------------------------------

  /** The socket's frame of a message sent (sent again after a drop, chat-stream.js). */
  userMessage(requestId, pending) {
    return { type: "user_message", ...messageBody(requestId, pending) };
  }

  /** Send a message: its text and its uploaded files (their attachment parts). */
  async send(text, attachments = []) {
    const requestId = crypto.randomUUID();
    const turn = this.turnFor(`request:${requestId}`);
    turn.setUser({ parts: [{ type: "text", text }, ...attachments] }, { pending: true });
    turn.setStatus("queued");
    const pending = { text, attachments, turn, viaSocket: false };
    this.pending.set(requestId, pending);
    scroll.stick = true;
    this.schedule();
    this.changed();
    if (this.sendFrame(this.userMessage(requestId, pending))) {
      pending.viaSocket = true;
      return;
    }
    // No socket right now: hand the message over HTTP; its events arrive once reconnected.
    try {
      const result = await api(`/api/conversations/${this.id}/messages/`, {
        method: "POST",
        body: messageBody(requestId, pending),
        signal: this.abort.signal,
      });
      if (this.alive) this.onAck(requestId, result.turn_id);
    } catch (error) {
      if (!this.alive || isAbort(error)) return;
      if (error instanceof ApiError && error.status === 404) return hooks.conversationGone(this.id);
      this.dropPending(requestId);
      hooks.composerError(error instanceof ApiError ? error.message : "Flarebot cannot be reached right now.");
    }
  }

  /** Stop what runs: the answer at once, a browser task only once the owner confirms (its steps stay). */
  async stop() {
    if (this.tasks.unfinished) {
      const stopping = await ask({ question: STOP_TASK, yes: "Stop the task", no: "Keep it" });
      if (!stopping || !this.alive) return;
    }
    await this.cancel();
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
