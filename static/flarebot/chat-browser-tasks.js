// Browser tasks on the chat page: one card per proposal, from its readback (Start, Dismiss)
// through the task's progress and its questions to its outcome.
//
// State comes from the list endpoint (on load) and then from durable events in sequence
// order; events at or below the list's sequence were already in it. Every text shown
// (goals, questions, page names, summaries) goes into text nodes only. The sign-in live
// view shows the pictures the task's worker sends while that point is open and forwards the
// owner's clicks and keys to the page; nothing typed is kept by this page.

const PROGRESS_TOTAL_FALLBACK = 40;
const STATUS_TEXT = {
  proposed: "Waiting for your Start",
  dismissed: "Dismissed",
  superseded: "Replaced by a newer proposal",
  running: "Running",
  paused: "Waiting for your answer",
  completed: "Completed",
  failed: "Failed",
  cancelled: "Cancelled",
};
// Named keys forwarded to a sign-in page; other single characters go as text.
const NAMED_KEYS = new Set([
  "Enter", "Tab", "Backspace", "Delete", "Escape", "ArrowLeft", "ArrowRight", "ArrowUp", "ArrowDown",
  "Home", "End", "PageUp", "PageDown",
]);
// Error codes of the task frames: an error frame with one of these answers a card, not a message.
export const TASK_ERROR_CODES = new Set([
  "proposal_not_found", "proposal_dismissed", "proposal_superseded", "proposal_started", "task_unfinished",
  "unknown_critical_point", "stale_critical_point", "wrong_reply", "sign_in_continue_only", "invalid_response",
]);

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function button(text, className, onClick) {
  const node = el("button", className, text);
  node.type = "button";
  node.addEventListener("click", onClick);
  return node;
}

class TaskCard {
  constructor(tasks, proposalId) {
    this.tasks = tasks;
    this.proposalId = proposalId;
    this.proposal = null; // {goal, start_url, restrictions}
    this.proposalStatus = "proposed";
    this.taskId = null;
    this.status = null; // the task's status once started
    this.point = null; // the open critical point
    this.progress = null; // {message, done, total}
    this.summary = "";
    this.frame = null; // the latest live-view picture {image, width, height}
    this.busy = false;

    this.el = el("section", "task-card");
    this.el.dataset.proposalId = proposalId;
    this.el.setAttribute("aria-label", "Browser task");
    this.head = el("div", "task-head");
    this.title = el("span", "task-title", "Browser task");
    this.state = el("span", "task-state");
    this.head.append(this.title, this.state);
    this.readback = el("div", "task-readback");
    this.controls = el("div", "task-controls");
    this.progressEl = el("p", "task-progress");
    this.question = el("div", "task-question");
    this.outcome = el("p", "task-outcome");
    this.error = el("p", "task-error");
    this.error.setAttribute("role", "alert");
    this.el.append(this.head, this.readback, this.controls, this.progressEl, this.question, this.outcome, this.error);
    this.render();
  }

  get unfinished() {
    return this.status === "running" || this.status === "paused";
  }

  showError(message) {
    this.busy = false;
    this.error.textContent = message || "";
    this.render();
  }

  render() {
    const status = this.status || this.proposalStatus;
    this.el.dataset.status = status;
    this.state.textContent = STATUS_TEXT[status] || status;
    this.renderReadback();
    this.renderControls();
    const progress = this.unfinished && this.status !== "paused" && this.progress ? this.progress : null;
    this.progressEl.hidden = !progress;
    if (progress) {
      const total = typeof progress.total === "number" ? progress.total : PROGRESS_TOTAL_FALLBACK;
      const counts = typeof progress.done === "number" ? ` (${progress.done} of ${total} actions)` : "";
      this.progressEl.textContent = `${progress.message || "Working"}${counts}`;
    }
    this.renderQuestion();
    const ended = ["completed", "failed", "cancelled"].includes(this.status);
    this.outcome.hidden = !ended;
    this.outcome.textContent = ended ? `${STATUS_TEXT[this.status]}: ${this.summary}` : "";
    this.error.hidden = !this.error.textContent;
    this.tasks.changed();
  }

  renderReadback() {
    if (!this.proposal) {
      this.readback.replaceChildren();
      return;
    }
    const list = el("dl", "task-fields");
    const field = (name, value) => {
      const term = el("dt", "", name);
      const detail = el("dd", "", value);
      list.append(term, detail);
      return detail;
    };
    field("Goal", this.proposal.goal).classList.add("task-goal");
    field("Start page", this.proposal.start_url).classList.add("task-url");
    const restrictions = el("ul", "task-restrictions");
    for (const restriction of this.proposal.restrictions || []) restrictions.append(el("li", "", restriction));
    if (!restrictions.children.length) restrictions.append(el("li", "muted", "None"));
    const term = el("dt", "", "Restrictions");
    const detail = el("dd");
    detail.append(restrictions);
    list.append(term, detail);
    this.readback.replaceChildren(list);
  }

  renderControls() {
    const nodes = [];
    if (!this.status && this.proposalStatus === "proposed") {
      const start = button("Start", "primary task-start", () => this.start());
      const dismiss = button("Dismiss", "task-dismiss", () => this.dismiss());
      start.disabled = dismiss.disabled = this.busy;
      nodes.push(start, dismiss);
    }
    this.controls.replaceChildren(...nodes);
    this.controls.hidden = !nodes.length;
  }

  renderQuestion() {
    const point = this.status === "paused" ? this.point : null;
    this.question.hidden = !point;
    if (!point) {
      if (this.question.childElementCount) this.question.replaceChildren();
      this.liveImage = null;
      return;
    }
    if (this.question.dataset.pointId === point.critical_point_id) {
      this.setBusy(this.busy);
      return; // the same question: keep what the owner is typing
    }
    this.question.dataset.pointId = point.critical_point_id;
    this.question.dataset.kind = point.kind;
    const nodes = [el("p", "task-question-text", point.question)];
    if (point.action && point.action.description) nodes.push(el("p", "task-held", `Held: ${point.action.description}`));
    const requests = (point.action && point.action.requests) || [];
    if (requests.length) {
      const list = el("ul", "task-held-requests");
      list.setAttribute("aria-label", "What it would send");
      for (const sent of requests) {
        const fields = sent.fields && sent.fields.length ? ` (fields: ${sent.fields.join(", ")})` : "";
        list.append(el("li", "", `${sent.method} ${sent.host}${sent.path}${fields}`));
      }
      nodes.push(list);
    }
    if (point.kind === "confirm") {
      const decision = el("div", "task-decision");
      decision.append(
        button("Approve", "primary task-approve", () => this.reply("Approved.", true)),
        button("Deny", "danger task-deny", () => this.reply("Denied: do not do this.", false)),
      );
      nodes.push(decision);
    }
    if (point.kind === "email_consent") {
      nodes.push(
        button("Yes, send it", "primary task-consent-yes", () => this.consent(true)),
        button("No", "task-consent-no", () => this.consent(false)),
      );
    } else if (point.kind === "sign_in") {
      nodes.push(this.liveView(), button("Continue after sign-in", "primary task-continue", () => this.reply("continue")));
    } else {
      const form = el("form", "task-answer");
      const box = el("textarea", "task-answer-text");
      box.rows = 2;
      box.setAttribute("aria-label", "Your answer");
      box.placeholder =
        point.kind === "confirm" ? "Or say what to do instead (this does not approve)" : "Your answer";
      const send = el("button", "primary task-answer-send", "Answer");
      form.append(box, send);
      form.addEventListener("submit", (event) => {
        event.preventDefault();
        if (box.value.trim()) this.reply(box.value); // the exact text, untrimmed
      });
      box.addEventListener("keydown", (event) => {
        if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
          event.preventDefault();
          form.requestSubmit();
        }
      });
      nodes.push(form);
    }
    this.question.replaceChildren(...nodes);
    this.setBusy(this.busy);
  }

  setBusy(busy) {
    for (const control of this.question.querySelectorAll("button, textarea")) control.disabled = busy;
  }

  liveView() {
    const box = el("div", "task-live");
    box.tabIndex = 0;
    box.setAttribute("role", "application");
    box.setAttribute("aria-label", "Live view of the task's page: click and type here to sign in");
    const image = el("img", "task-live-image");
    image.alt = "The task's page";
    image.hidden = !this.frame;
    const waiting = el("p", "muted task-live-waiting", "Waiting for the page…");
    waiting.hidden = !!this.frame;
    box.append(image, waiting, el("p", "muted small", "Your clicks and keys go to this page only; nothing you type is kept."));
    this.liveImage = image;
    this.liveWaiting = waiting;
    if (this.frame) this.showFrame();
    image.addEventListener("click", (event) => {
      const rect = image.getBoundingClientRect();
      if (!this.frame || !rect.width || !rect.height) return;
      const x = ((event.clientX - rect.left) / rect.width) * this.frame.width;
      const y = ((event.clientY - rect.top) / rect.height) * this.frame.height;
      this.input({ kind: "click", x: Math.round(x * 10) / 10, y: Math.round(y * 10) / 10 });
      box.focus({ preventScroll: true });
    });
    box.addEventListener("keydown", (event) => {
      if (event.isComposing || event.ctrlKey || event.metaKey || event.altKey) return;
      if (event.key.length === 1) this.input({ kind: "text", text: event.key });
      else if (event.key === "Tab" && event.shiftKey) this.input({ kind: "key", key: "Shift+Tab" });
      else if (NAMED_KEYS.has(event.key)) this.input({ kind: "key", key: event.key });
      else return;
      event.preventDefault();
    });
    return box;
  }

  showFrame() {
    if (!this.liveImage || !this.frame) return;
    this.liveImage.src = `data:image/jpeg;base64,${this.frame.image}`;
    this.liveImage.hidden = false;
    if (this.liveWaiting) this.liveWaiting.hidden = true;
  }

  // --- actions ------------------------------------------------------------------------

  async start() {
    this.busy = true;
    this.error.textContent = "";
    this.render();
    this.tasks.lastActor = this;
    const frame = { type: "browser_task_confirm", proposal_id: this.proposalId };
    if (this.tasks.send(frame)) return;
    try {
      const result = await this.tasks.startOverHttp(this.proposalId);
      this.started(result.task_id);
    } catch (error) {
      this.showError(error && error.message ? error.message : "The task could not be started.");
    }
  }

  dismiss() {
    this.busy = true;
    this.render();
    this.tasks.lastActor = this;
    if (!this.tasks.send({ type: "browser_task_dismiss", proposal_id: this.proposalId })) {
      this.showError("Not connected; try again in a moment.");
    }
  }

  /** Answer the open question; for a held action, `approve` (true or false) is the decision, the text only words. */
  reply(text, approve) {
    if (!this.point) return;
    this.busy = true;
    this.setBusy(true);
    this.tasks.lastActor = this;
    const frame = { type: "critical_point_response", critical_point_id: this.point.critical_point_id, response: text };
    if (approve !== undefined) frame.approve = approve;
    if (!this.tasks.send(frame)) this.showError("Not connected; your answer was not sent. Try again in a moment.");
  }

  consent(yes) {
    if (!this.point) return;
    this.busy = true;
    this.setBusy(true);
    this.tasks.lastActor = this;
    const frame = { type: "email_consent_response", critical_point_id: this.point.critical_point_id, consent: yes };
    if (!this.tasks.send(frame)) this.showError("Not connected; your answer was not sent. Try again in a moment.");
  }

  input(input) {
    if (!this.point || this.point.kind !== "sign_in" || !this.taskId) return;
    this.tasks.send({
      type: "browser_input",
      task_id: this.taskId,
      critical_point_id: this.point.critical_point_id,
      input,
    });
  }

  // --- state from the server ----------------------------------------------------------

  setProposal(proposal, status) {
    this.proposal = { goal: proposal.goal, start_url: proposal.start_url, restrictions: proposal.restrictions || [] };
    if (status) this.proposalStatus = status;
    this.render();
  }

  setProposalStatus(status) {
    this.proposalStatus = status;
    this.busy = false;
    this.render();
  }

  started(taskId) {
    this.taskId = taskId;
    this.tasks.byTask.set(taskId, this);
    this.proposalStatus = "started";
    if (!this.status) this.status = "running";
    this.busy = false;
    this.render();
  }

  setTask(task) {
    this.started(task.task_id);
    this.status = task.status;
    this.point = task.open_critical_point;
    this.summary = task.summary || "";
    this.render();
  }

  opened(point) {
    this.status = "paused";
    this.point = point;
    this.frame = null;
    this.busy = false;
    this.error.textContent = "";
    this.render();
  }

  resolved(pointId) {
    if (this.point && this.point.critical_point_id === pointId) {
      this.point = null;
      this.frame = null;
      if (this.status === "paused") this.status = "running";
    }
    this.busy = false;
    this.render();
  }

  finished(outcome, summary) {
    this.status = outcome;
    this.summary = summary || "";
    this.point = null;
    this.frame = null;
    this.busy = false;
    this.render();
  }

  setActivity(activity) {
    this.progress = activity.progress || null;
    this.render();
  }

  setFrame(frame) {
    if (!this.point || this.point.kind !== "sign_in") return;
    this.frame = { image: String(frame.image || ""), width: Number(frame.width) || 1280, height: Number(frame.height) || 900 };
    this.showFrame();
  }
}

/** The browser task cards of one conversation view. */
export class BrowserTasks {
  constructor({ send, startOverHttp, onChange }) {
    this.send = send;
    this.startOverHttp = startOverHttp;
    this.onChange = onChange;
    this.cards = new Map(); // proposal id -> TaskCard
    this.byTask = new Map(); // task id -> TaskCard
    this.listedSequence = 0;
    this.lastActor = null;
  }

  /** Forget every card (the view loads its conversation again). */
  reset() {
    for (const card of this.cards.values()) card.el.remove();
    this.cards.clear();
    this.byTask.clear();
    this.listedSequence = 0;
    this.lastActor = null;
  }

  card(proposalId) {
    let card = this.cards.get(proposalId);
    if (!card) {
      card = new TaskCard(this, proposalId);
      this.cards.set(proposalId, card);
    }
    return card;
  }

  get unfinished() {
    return [...this.cards.values()].some((card) => card.unfinished);
  }

  changed() {
    if (this.onChange) this.onChange();
  }

  /** Take the list endpoint's state; events up to its sequence are already in it. */
  applyList(list, activities) {
    this.listedSequence = Number(list.last_sequence) || 0;
    for (const proposal of list.proposals || []) this.card(proposal.proposal_id).setProposal(proposal, proposal.status);
    for (const task of list.tasks || []) {
      const card = this.card(task.proposal_id);
      if (!card.proposal) card.setProposal(task);
      card.setTask(task);
      const activity = activities.get(`browser_task:${task.task_id}`);
      if (activity) card.setActivity(activity);
    }
  }

  /** Apply one durable event; true when it was a browser task's. */
  onEvent(frame) {
    const data = frame.data || {};
    const kind = frame.event;
    if (kind === "activity.updated") {
      const activity = data.activity;
      if (!activity || activity.kind !== "browser_task") return false;
      if (frame.sequence <= this.listedSequence) return true;
      const card = this.byTask.get(String(activity.tool_call_id).replace(/^browser_task:/, ""));
      if (card) card.setActivity(activity);
      return true;
    }
    if (!kind.startsWith("browser_task.") && !kind.startsWith("critical_point.")) return false;
    if (frame.sequence <= this.listedSequence) return true;
    switch (kind) {
      case "browser_task.proposed": {
        for (const other of this.cards.values()) {
          if (!other.status && other.proposalStatus === "proposed" && other.proposalId !== data.proposal_id) {
            other.setProposalStatus("superseded");
          }
        }
        this.card(data.proposal_id).setProposal(data, "proposed");
        break;
      }
      case "browser_task.dismissed":
        this.card(data.proposal_id).setProposalStatus("dismissed");
        break;
      case "browser_task.started":
        if (data.proposal_id) this.card(data.proposal_id).started(data.task_id);
        break;
      case "critical_point.opened": {
        const card = this.byTask.get(data.task_id);
        if (card) card.opened(data);
        break;
      }
      case "critical_point.resolved": {
        const card = this.byTask.get(data.task_id);
        if (card) card.resolved(data.critical_point_id);
        break;
      }
      case "browser_task.finished": {
        const card = this.byTask.get(data.task_id);
        if (card) card.finished(data.outcome, data.summary);
        break;
      }
      default:
        break;
    }
    return true;
  }

  /** A live-view picture (a presentation frame, without a sequence). */
  onPicture(frame) {
    const card = this.byTask.get(frame.task_id);
    if (card) card.setFrame(frame);
  }

  /** An error frame that answers the card that sent the last task frame. */
  onError(frame) {
    const card = this.lastActor;
    if (card) card.showError(frame.message);
  }
}
