// One browser task's card, from its proposal's readback (Start, Dismiss) through its
// progress and questions (chat-task-views.js) to its outcome, with its record: every step
// and every answer, open while the task runs and collapsed (a disclosure) once it ended.
// `tasks` (chat-browser-tasks.js) sends its frames. Every text shown goes into text nodes only.
import { button, el } from "./dom.js";
import { questionNodes, readbackView, recordNodes } from "./chat-task-views.js";

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
// A task's own statuses where a proposal's read differently ("superseded": by the owner's correction).
const TASK_STATUS_TEXT = { ...STATUS_TEXT, superseded: "Superseded by your correction" };
const OUTCOME_TEXT = { completed: "Completed", failed: "Failed", cancelled: "Cancelled", superseded: "Superseded" };
const ENDED = new Set(Object.keys(OUTCOME_TEXT));

export class TaskCard {
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
    this.steps = new Map(); // step number -> the record's step
    this.questions = new Map(); // critical point id -> the record's question (with the answer)
    this.recordChanged = true;
    this.recordOpen = null; // the owner's choice once they toggle it; else open only while unfinished

    this.el = el("section", "task-card");
    this.el.dataset.proposalId = proposalId;
    this.el.id = `browser-task-${proposalId}`; // the needs-you list's links land here
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
    this.record = el("details", "task-record");
    this.recordSummary = el("summary", "task-record-summary");
    this.recordList = el("ol", "task-steps");
    this.record.append(this.recordSummary, this.recordList);
    this.record.addEventListener("toggle", () => {
      this.recordOpen = this.record.open;
    });
    this.el.append(
      this.head, this.readback, this.controls, this.progressEl, this.question, this.outcome, this.record, this.error,
    );
    this.render();
  }

  get ended() {
    return ENDED.has(this.status);
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
    this.state.textContent = (this.status ? TASK_STATUS_TEXT : STATUS_TEXT)[status] || status;
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
    const ended = this.ended;
    this.outcome.hidden = !ended;
    this.outcome.textContent = ended ? `${OUTCOME_TEXT[this.status]}: ${this.summary}` : "";
    this.renderRecord();
    this.error.hidden = !this.error.textContent;
    this.tasks.changed();
  }

  renderRecord() {
    const steps = this.steps.size;
    const questions = this.questions.size;
    this.record.hidden = !this.taskId || (!steps && !questions);
    const open = this.recordOpen === null ? !this.ended : this.recordOpen;
    if (this.record.open !== open) this.record.open = open;
    if (!this.recordChanged) return;
    this.recordChanged = false;
    const counts = [`${steps} ${steps === 1 ? "step" : "steps"}`];
    if (questions) counts.push(`${questions} ${questions === 1 ? "question" : "questions"}`);
    this.recordSummary.textContent = `Steps and answers (${counts.join(", ")})`;
    this.recordList.replaceChildren(...recordNodes(this));
  }

  renderReadback() {
    const startable = !this.status && this.proposalStatus === "proposed";
    this.readback.replaceChildren(...(this.proposal ? [readbackView(this.proposal, { startable })] : []));
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
    this.question.replaceChildren(...questionNodes(this, point));
    this.setBusy(this.busy);
  }

  setBusy(busy) {
    for (const control of this.question.querySelectorAll("button, textarea")) control.disabled = busy;
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
    if (!this.tasks.sendSoon({ type: "browser_task_dismiss", proposal_id: this.proposalId })) {
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
    if (!this.tasks.sendSoon(frame)) this.showError("Not connected; your answer was not sent. Try again in a moment.");
  }

  consent(yes) {
    if (!this.point) return;
    this.busy = true;
    this.setBusy(true);
    this.tasks.lastActor = this;
    const frame = { type: "email_consent_response", critical_point_id: this.point.critical_point_id, consent: yes };
    if (!this.tasks.sendSoon(frame)) this.showError("Not connected; your answer was not sent. Try again in a moment.");
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
    this.proposal = {
      goal: proposal.goal,
      start_url: proposal.start_url,
      restrictions: proposal.restrictions || [],
      corrects_task_id: proposal.corrects_task_id || null,
      carried_restrictions: proposal.carried_restrictions || [],
    };
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
    this.steps = new Map((task.steps || []).map((step) => [step.number, step]));
    this.questions = new Map((task.questions || []).map((question) => [question.critical_point_id, question]));
    this.recordChanged = true;
    this.render();
  }

  setStep(step) {
    this.steps.set(step.number, step);
    this.recordChanged = true;
    this.render();
  }

  opened(point) {
    this.status = "paused";
    this.point = point;
    this.questions.set(point.critical_point_id, { ...point, state: "open", answer: null, resolved_at: null });
    this.recordChanged = true;
    this.frame = null;
    this.busy = false;
    this.error.textContent = "";
    this.render();
  }

  resolved(pointId, data) {
    const question = this.questions.get(pointId);
    if (question) {
      this.questions.set(pointId, {
        ...question,
        state: "resolved",
        answer: (data && data.answer) || null,
        resolved_at: (data && data.resolved_at) || null,
      });
      this.recordChanged = true;
    }
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
    this.recordOpen = null; // collapsed once it ended, whatever it was while it ran
    for (const [id, question] of this.questions) {
      if (question.state === "open") this.questions.set(id, { ...question, state: "void" });
    }
    this.recordChanged = true;
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
