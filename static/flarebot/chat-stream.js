// A conversation's socket and event stream (PROTOCOL.md "The conversation socket").
//
// Ordering rules: every durable event carries a gap-free per-conversation `sequence`; the
// view applies each sequence once (dropping anything at or below the last applied) and
// reconnects with `last_sequence` set to it, so a dropped socket resumes with no missing and
// no repeated text. A gap is never expected; if one shows, the view starts over from the
// transcript. `EventStream` is the base of `ConversationView` (chat-view.js), which owns the
// turns that the events below are applied to.

import { toSignIn } from "./api.js";
import { returnedAttachments } from "./chat-attachment-chips.js";
import { TASK_ERROR_CODES } from "./chat-browser-tasks.js";
import { hooks, notify, setConnection } from "./chat-shell.js";

const RECONNECT_MIN_MS = 500;
const RECONNECT_MAX_MS = 10000;
const CLOSE_SESSION_EXPIRED = 4001;
const CLOSE_REFUSED = 4003;
const CLOSE_NOT_FOUND = 4004;
const OPEN_SETTLE_MS = 150;

/** How each event kind about a turn changes the view: (view, turnId, data). */
const EVENTS = {
  "turn.queued": (view, turnId, data) => {
    const turn = (data.request_id && view.stored(data.request_id, turnId)) || view.turnFor(turnId);
    if (data.message) turn.setUser(data.message);
    turn.setStatus("queued");
    hooks.conversationsChanged();
  },
  "turn.started": (view, turnId) => view.turnFor(turnId).setStatus("running"),
  "text.delta": (view, turnId, data) => {
    const turn = view.turnFor(turnId);
    if (turn.assistantEl && data.message_id) turn.assistantEl.dataset.messageId = data.message_id;
    turn.appendText(String(data.text || ""));
  },
  "message.replaced": (view, turnId, data) => view.turnFor(turnId).setParts(Array.isArray(data.parts) ? data.parts : []),
  "tool.started": (view, turnId, data) => {
    const turn = view.turnFor(turnId);
    turn.ensureAssistant();
    if (!turn.toolPart(data.tool_call_id)) {
      turn.parts.push({ type: "tool", tool_call_id: data.tool_call_id, name: data.name, input: data.input, output: null });
      turn.rebuild();
    }
  },
  "tool.progress": (view, turnId, data) => view.turnFor(turnId).card(data.tool_call_id).setProgress(data.progress || null),
  "tool.finished": (view, turnId, data) => {
    const turn = view.turnFor(turnId);
    const part = turn.toolPart(data.tool_call_id);
    if (part) {
      part.output = data.output;
      part.status = data.status;
      turn.card(data.tool_call_id).setPart(part);
      turn.renderSources();
    }
    // Files the call returned join the answer now, in every tab, not at the next load.
    const held = new Set(turn.parts.filter((p) => p.type === "attachment").map((p) => p.id));
    const files = returnedAttachments(data.status, data.output).filter((file) => !held.has(file.id));
    if (files.length) {
      turn.ensureAssistant();
      turn.parts.push(...files);
      turn.rebuild();
    }
  },
  "activity.updated": (view, turnId, data) => {
    const activity = data.activity;
    if (!activity || !activity.tool_call_id) return;
    view.activities.set(activity.tool_call_id, activity);
    if (!activity.turn_id && !turnId) return;
    const turn = view.turnFor(activity.turn_id || turnId);
    const known = turn.cards.has(activity.tool_call_id);
    turn.card(activity.tool_call_id).setActivity(activity);
    if (!known) {
      turn.ensureAssistant();
      turn.rebuild();
    }
  },
  "write_proposal.updated": (view, turnId, data) => {
    const proposal = data.proposal;
    if (!proposal || !proposal.tool_call_id) return;
    const turn = view.turnFor(turnId);
    const part = turn.toolPart(proposal.tool_call_id);
    if (!part || !part.output || typeof part.output !== "object") return;
    part.output = { ...part.output, proposal };
    turn.card(proposal.tool_call_id).setPart(part);
  },
  "turn.completed": (view, turnId) => view.turnFor(turnId).setStatus("completed"),
  "turn.failed": (view, turnId, data) =>
    view.turnFor(turnId).setStatus("failed", { code: data.code, message: data.message }),
  "turn.cancelled": (view, turnId) => view.turnFor(turnId).setStatus("cancelled"),
};

export class EventStream {
  constructor() {
    this.alive = true;
    this.lastSequence = 0;
    this.socket = null;
    this.attempt = 0;
    this.retryTimer = 0;
    this.live = false; // the socket stayed open a moment: the server admitted it
    this.unsent = []; // frames given to sendSoon() while the socket was not live
  }

  connect() {
    if (!this.alive) return;
    this.closeSocket();
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    // notices=1: also the owner's unread counts and needs-you changes (chat-unread.js, chat-attention.js).
    const url = `${scheme}//${location.host}/ws/conversations/${this.id}/?last_sequence=${this.lastSequence}&notices=1`;
    const socket = new WebSocket(url);
    this.socket = socket;
    let settling = 0;
    socket.onopen = () => {
      // A refused socket is accepted and closed at once with its code (4001, 4003, 4004):
      // call it live, and send again, only once it stayed open for a moment.
      settling = setTimeout(() => {
        if (socket !== this.socket || socket.readyState !== WebSocket.OPEN) return;
        // Back after a drop: owner-wide frames sent meanwhile are never replayed; read again.
        if (this.attempt > 0) {
          hooks.conversationsChanged();
          hooks.attentionChanged();
        }
        this.attempt = 0;
        this.live = true;
        setConnection("live");
        // A message sent before a drop may never have been stored: send it again; the
        // request_id makes a repeat return the same turn.
        for (const [requestId, pending] of this.pending) {
          this.sendFrame(this.userMessage(requestId, pending));
        }
        for (const frame of this.unsent.splice(0)) this.sendFrame(frame);
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
      this.live = false;
      if (event.code === CLOSE_SESSION_EXPIRED) return toSignIn();
      if (event.code === CLOSE_NOT_FOUND) return hooks.conversationGone(this.id);
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
    this.live = false;
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

  /**
   * Send a frame now if the socket is live, or as soon as it is: a page that has just shown
   * its transcript is still connecting, and a dropped socket is being reconnected (an open
   * socket the server refuses at once would lose it). False only when this view is gone.
   * For the owner's answers, which have no other way to go and may wait.
   */
  sendSoon(frame) {
    if (this.live && this.sendFrame(frame)) return true;
    if (!this.alive) return false;
    this.unsent.push(frame);
    return true;
  }

  // --- frames and events --------------------------------------------------------------

  onFrame(frame) {
    if (frame.type === "event") this.onEvent(frame);
    else if (frame.type === "ack") this.onAck(frame.request_id, frame.turn_id);
    else if (frame.type === "error") this.onErrorFrame(frame);
    else if (frame.type === "frame") this.tasks.onPicture(frame);
    // The owner's, whatever this socket's conversation: a count moved, a conversation was
    // named or moved up the list, the needs-you list changed.
    else if (frame.type === "unread") hooks.unread(frame.conversation_id, Number(frame.unread) || 0);
    else if (frame.type === "conversation_changed") hooks.conversationChanged(frame.conversation);
    else if (frame.type === "attention_changed") hooks.attentionChanged();
  }

  onAck(requestId, turnId) {
    if (!this.stored(requestId, turnId)) return;
    this.changed(); // an optimistic turn the snapshot already held is gone: Stop may be too
    // The message moved the conversation to the top and may have titled it (the server's rule).
    hooks.conversationsChanged();
  }

  /**
   * A message of this page's the server stored (its ack or its turn.queued event, whichever
   * comes first): it stops being pending, and its optimistic turn takes the turn's id, unless
   * that turn already arrived (an event, a snapshot). From then on the snapshots and events
   * alone show it, on whichever branch of versions: kept pending, a later snapshot would
   * show it again after an edit hid it. Returns the turn, or null if it was not pending.
   */
  stored(requestId, turnId) {
    const pending = this.pending.get(requestId);
    if (!pending) return null;
    this.pending.delete(requestId);
    const turn = pending.turn;
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
    const entry = [...this.pending].find(([, p]) => p.viaSocket);
    if (entry) this.dropPending(entry[0]);
    hooks.composerError(frame.message || "That did not work.");
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
    if (frame.event === "conversation.cleared" || frame.event === "conversation.branch_switched") {
      // Every earlier event is gone, or another branch of versions is shown: show the
      // conversation as the server now has it.
      this.resync();
      return;
    }
    if (this.tasks.onEvent(frame)) {
      this.placeTaskCards();
      this.changed();
      return;
    }
    const turnId = frame.turn_id;
    if (!turnId && frame.event !== "activity.updated") return; // not about a turn: nothing to show yet
    const apply = EVENTS[frame.event];
    if (!apply) return; // kinds this page does not show (yet)
    apply(this, turnId, frame.data || {});
    this.schedule();
    this.changed();
  }

  resync() {
    this.closeSocket();
    this.loaded = false;
    this.load();
  }
}
