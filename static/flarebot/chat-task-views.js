// A browser task card's readback, open question (a held action with what it would submit,
// an email consent, a sign-in through the live view, a question) and record (its steps, each
// question with the owner's answer); the owner's answers go to the card. Text nodes only:
// what a held action would submit is the page's own text (masked by the server).
import { button, el, localTime } from "./dom.js";

const CORRECTS = "The unfinished browser task above: Start ends it and carries on from its page (on the same site).";

const CORRECTED = "The browser task above."; // once Start was pressed, or can no longer be
// What Approve and Deny send as the owner's words beside their decision.
const APPROVED = "Approved.";
const DENIED = "Denied: do not do this.";

const OUTCOME_TEXT = {
  running: "Doing it now",
  done: "Done",
  failed: "Failed",
  refused: "Refused",
  interrupted: "Interrupted",
  cancelled: "Stopped",
  asked: "Waiting for your answer",
  answered: "Answered",
};

// Named keys forwarded to a sign-in page; other single characters go as text.
const NAMED_KEYS = new Set([
  "Enter", "Tab", "Backspace", "Delete", "Escape", "ArrowLeft", "ArrowRight", "ArrowUp", "ArrowDown",
  "Home", "End", "PageUp", "PageDown",
]);

/**
 * The proposal's goal, start page and restrictions; a correction's carried-over restrictions
 * are marked. What Start does to the corrected task is said only while Start is offered.
 */
export function readbackView(proposal, { startable = true } = {}) {
  const list = el("dl", "task-fields");
  const field = (name, value) => {
    const detail = el("dd", "", value);
    list.append(el("dt", "", name), detail);
    return detail;
  };
  if (proposal.corrects_task_id) {
    field("Corrects", startable ? CORRECTS : CORRECTED).classList.add("task-corrects");
  }
  field("Goal", proposal.goal).classList.add("task-goal");
  field("Start page", proposal.start_url).classList.add("task-url");
  const restrictions = el("ul", "task-restrictions");
  const carried = (proposal.carried_restrictions || []).length; // they lead the list
  (proposal.restrictions || []).forEach((restriction, index) => {
    const item = el("li", "", restriction);
    if (index < carried) {
      item.classList.add("task-carried");
      item.append(" ", el("span", "task-carried-badge", "carried over"));
    }
    restrictions.append(item);
  });
  if (!restrictions.children.length) restrictions.append(el("li", "muted", "None"));
  field("Restrictions").append(restrictions);
  return list;
}

/** An open critical point: its question, what is held, and the ways to answer. */
export function questionNodes(card, point) {
  const nodes = [el("p", "task-question-text", point.question)];
  if (point.action && point.action.description) nodes.push(el("p", "task-held", `Held: ${point.action.description}`));
  nodes.push(...heldNodes(point.action, "task-held-requests"));
  if (point.kind === "confirm") {
    // Approve and Deny decide (`approve`); the words beside them only tell the task's model.
    const decision = el("div", "task-decision");
    decision.append(
      button("Approve", "primary task-approve", () => card.reply(APPROVED, true)),
      button("Deny", "danger task-deny", () => card.reply(DENIED, false)),
    );
    const reply = el("div", "task-reply");
    reply.append(decision, answerForm(card, point));
    nodes.push(reply);
  } else if (point.kind === "email_consent") {
    nodes.push(
      button("Yes, send it", "primary task-consent-yes", () => card.consent(true)),
      button("No", "task-consent-no", () => card.consent(false)),
    );
  } else if (point.kind === "sign_in") {
    nodes.push(liveView(card), button("Continue after sign-in", "primary task-continue", () => card.reply("continue")));
  } else {
    nodes.push(answerForm(card, point));
  }
  return nodes;
}

/**
 * What a held action would submit: a clicked submit button's form (`action.submission`) and
 * the requests it tried (`action.requests`, each with its `submission` when the server made
 * one, else as a line: method, host, path and field names). The open question lists every
 * request; the record keeps the submissions of the questions answered or void.
 */
function heldNodes(action, listClass) {
  const nodes = [];
  const open = listClass === "task-held-requests";
  if (action && action.submission) nodes.push(submissionView(action.submission));
  const requests = ((action && action.requests) || []).filter((sent) => open || sent.submission);
  if (requests.length) {
    const list = el("ul", listClass);
    list.setAttribute("aria-label", "What it would send");
    for (const sent of requests) {
      if (sent.submission) {
        const item = el("li");
        item.append(submissionView(sent.submission));
        list.append(item);
      } else {
        const fields = sent.fields && sent.fields.length ? ` (fields: ${sent.fields.join(", ")})` : "";
        list.append(el("li", "task-held-line", `${sent.method} ${sent.host}${sent.path}${fields}`));
      }
    }
    nodes.push(list);
  }
  return nodes;
}

const plural = (count, one, many) => `${count} ${count === 1 ? one : many}`;

/** One submission: method and address, the button, each field's value (masked, hidden, cut as marked), a body. */
function submissionView(submission) {
  const box = el("div", "task-submission");
  box.dataset.form = submission.form ? "1" : "";
  box.append(el("p", "task-submission-heading", submission.form ? "The form would submit" : "The page would send"));
  box.append(el("p", "task-submission-address", `${submission.method} ${submission.address}`));
  if (submission.button) {
    const text = submission.button_text ? ` (it reads “${submission.button_text}”)` : "";
    box.append(el("p", "task-submission-button", `Button: “${submission.button}”${text}`));
  }
  const fields = submission.fields || [];
  if (fields.length) {
    const list = el("dl", "task-submission-fields");
    list.setAttribute("aria-label", "Fields and values");
    for (const field of fields) {
      const name = el("dt", "task-field-name", field.name || "(no name)");
      if (field.hidden) name.append(" ", el("span", "task-field-hidden", "hidden"));
      const value = el("dd", "task-field-value", field.cut ? `${field.value}…` : field.value);
      if (field.masked) {
        value.classList.add("task-field-masked");
        value.title = "Masked: a password or other secret is not shown";
      }
      list.append(name, value);
    }
    box.append(list);
  } else if (submission.form) {
    box.append(el("p", "muted task-submission-none", "No fields"));
  }
  if (submission.fields_more) {
    box.append(el("p", "muted task-submission-more", `and ${plural(submission.fields_more, "more field", "more fields")}`));
  }
  if (submission.body) {
    box.append(el("pre", "task-submission-body", submission.body_cut ? `${submission.body}…` : submission.body));
  }
  return box;
}

function answerForm(card, point) {
  const form = el("form", "task-answer");
  const box = el("textarea", "task-answer-text");
  box.rows = 2;
  box.setAttribute("aria-label", "Your answer");
  box.placeholder = point.kind === "confirm" ? "Or say what to do instead (this does not approve)" : "Your answer";
  const send = el("button", "primary task-answer-send", "Answer");
  form.append(box, send);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (box.value.trim()) card.reply(box.value); // the exact text, untrimmed
  });
  box.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      form.requestSubmit();
    }
  });
  return form;
}

// The sign-in live view: the worker's pictures of the page; the owner's clicks and keys go to
// it, and nothing typed is kept here.
function liveView(card) {
  const box = el("div", "task-live");
  box.tabIndex = 0;
  box.setAttribute("role", "application");
  box.setAttribute("aria-label", "Live view of the task's page: click and type here to sign in");
  const image = el("img", "task-live-image");
  image.alt = "The task's page";
  image.hidden = !card.frame;
  const waiting = el("p", "muted task-live-waiting", "Waiting for the page…");
  waiting.hidden = !!card.frame;
  box.append(image, waiting, el("p", "muted small", "Your clicks and keys go to this page only; nothing you type is kept."));
  card.liveImage = image;
  card.liveWaiting = waiting;
  if (card.frame) card.showFrame();
  image.addEventListener("click", (event) => {
    const rect = image.getBoundingClientRect();
    if (!card.frame || !rect.width || !rect.height) return;
    const x = ((event.clientX - rect.left) / rect.width) * card.frame.width;
    const y = ((event.clientY - rect.top) / rect.height) * card.frame.height;
    card.input({ kind: "click", x: Math.round(x * 10) / 10, y: Math.round(y * 10) / 10 });
    box.focus({ preventScroll: true });
  });
  box.addEventListener("keydown", (event) => {
    if (event.isComposing || event.ctrlKey || event.metaKey || event.altKey) return;
    if (event.key.length === 1) card.input({ kind: "text", text: event.key });
    else if (event.key === "Tab" && event.shiftKey) card.input({ kind: "key", key: "Shift+Tab" });
    else if (NAMED_KEYS.has(event.key)) card.input({ kind: "key", key: event.key });
    else return;
    event.preventDefault();
  });
  return box;
}

/** The record's list items: each step (action, element, page, outcome) with its question and answer. */
export function recordNodes(card) {
  const steps = [...card.steps.values()].sort((a, b) => a.number - b.number);
  const asked = new Set();
  const items = steps.map((step) => {
    const item = el("li", "task-step");
    item.dataset.outcome = step.outcome;
    const head = el("div", "task-step-head");
    head.append(
      el("span", "task-step-text", step.description),
      el("span", "task-step-outcome", outcomeText(card, step)),
    );
    const facts = el("div", "task-step-facts");
    facts.append(el("span", "task-step-action", step.action));
    if (step.element) {
      const { number, role, name } = step.element;
      facts.append(el("span", "task-step-element", `element ${number}: ${role}${name ? ` "${name}"` : ""}`));
    }
    if (step.page) facts.append(el("span", "task-step-page", step.page));
    item.append(head, facts);
    const question = step.critical_point_id && card.questions.get(step.critical_point_id);
    if (question) {
      asked.add(question.critical_point_id);
      item.append(questionRecord(question));
    }
    return item;
  });
  // A question no step names (never expected) is still part of the record.
  for (const question of card.questions.values()) {
    if (asked.has(question.critical_point_id)) continue;
    const item = el("li", "task-step");
    item.append(questionRecord(question));
    items.push(item);
  }
  return items;
}

function outcomeText(card, step) {
  if (step.outcome === "asked" && card.ended) return "Not answered";
  return OUTCOME_TEXT[step.outcome] || step.outcome;
}

function questionRecord(question) {
  const box = el("div", "task-record-question");
  box.dataset.kind = question.kind;
  box.dataset.state = question.state;
  box.append(el("p", "task-record-asked", question.question));
  if (question.action && question.action.description) {
    box.append(el("p", "task-record-held", `Held: ${question.action.description}`));
  }
  if (question.state !== "open") box.append(...heldNodes(question.action, "task-record-requests")); // open: shown above
  const answer = el("p", "task-record-answer");
  answer.append(el("span", "task-record-answer-text", answerText(question)));
  if (question.state === "resolved" && question.resolved_at) {
    answer.append(" · ", localTime(question.resolved_at));
  }
  box.append(answer);
  return box;
}

function answerText(question) {
  if (question.state === "open") return "Waiting for your answer";
  if (question.state !== "resolved" || !question.answer) return "Not answered: the task ended first";
  const { response, approve, consent } = question.answer;
  switch (question.kind) {
    case "confirm":
      if (approve === true) return `You approved: “${response}”`;
      if (approve === false) return `You denied: “${response}”`;
      return `You answered in words (not an approval): “${response}”`;
    case "email_consent":
      return consent ? "You consented to sending" : "You did not consent";
    case "sign_in":
      return "You signed in and continued";
    default:
      return `You answered: “${response}”`;
  }
}
