// A browser task card's readback and open question (a held action, an email consent, a
// sign-in through the live view, a question); the owner's answers go to the card.
import { button, el } from "./dom.js";

// Named keys forwarded to a sign-in page; other single characters go as text.
const NAMED_KEYS = new Set([
  "Enter", "Tab", "Backspace", "Delete", "Escape", "ArrowLeft", "ArrowRight", "ArrowUp", "ArrowDown",
  "Home", "End", "PageUp", "PageDown",
]);

/** The proposal's goal, start page and restrictions. */
export function readbackView(proposal) {
  const list = el("dl", "task-fields");
  const field = (name, value) => {
    const detail = el("dd", "", value);
    list.append(el("dt", "", name), detail);
    return detail;
  };
  field("Goal", proposal.goal).classList.add("task-goal");
  field("Start page", proposal.start_url).classList.add("task-url");
  const restrictions = el("ul", "task-restrictions");
  for (const restriction of proposal.restrictions || []) restrictions.append(el("li", "", restriction));
  if (!restrictions.children.length) restrictions.append(el("li", "muted", "None"));
  field("Restrictions").append(restrictions);
  return list;
}

/** An open critical point: its question, what is held, and the ways to answer. */
export function questionNodes(card, point) {
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
      button("Approve", "primary task-approve", () => card.reply("Approved.", true)),
      button("Deny", "danger task-deny", () => card.reply("Denied: do not do this.", false)),
    );
    nodes.push(decision);
  }
  if (point.kind === "email_consent") {
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
