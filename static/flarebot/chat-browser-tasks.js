// Browser tasks on the chat page: a view's cards (chat-task-card.js), one per proposal.
// State comes from the list endpoint (on load) and then from durable events in sequence
// order; events at or below the list's sequence were already in it. A task's record (its
// steps and the owner's answers) comes the same way, so a reload shows all of it again.
import { TaskCard } from "./chat-task-card.js";

// Error codes of the task frames: an error frame with one of these answers a card, not a message.
export const TASK_ERROR_CODES = new Set([
  "proposal_not_found", "proposal_dismissed", "proposal_superseded", "proposal_started", "task_unfinished",
  "unknown_critical_point", "stale_critical_point", "wrong_reply", "sign_in_continue_only", "invalid_response",
]);

/** The browser task cards of one conversation view. */
export class BrowserTasks {
  constructor({ send, sendSoon, startOverHttp, onChange }) {
    this.send = send; // now or not at all (false): for what has another way (Start over HTTP) or is live input
    this.sendSoon = sendSoon; // now or once the socket is live: the owner's answers and dismissals
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
        if (card) card.resolved(data.critical_point_id, data);
        break;
      }
      case "browser_task.step": {
        const card = this.byTask.get(data.task_id);
        if (card && data.step) card.setStep(data.step);
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
