// One turn of the transcript on screen: the owner's message, the answer's parts (Markdown
// text, tool cards, browser task cards), its sources and its closing note. A turn renders
// its text parts only when its view asks (once per frame), never per delta.

import { renderMarkdown } from "./markdown.js";
import { ToolCard, renderSources, sourcesOf } from "./chat-tools.js";
import { decorateCode } from "./chat-code.js";
import { ACTIVE } from "./chat-shell.js";
import { attachmentChips } from "./chat-attachment-chips.js";
import { button, el } from "./dom.js";

const turnsByElement = new WeakMap();

/** Return the Turn that an element of the transcript belongs to, or null. */
export function turnOf(node) {
  const article = node && node.closest("article.turn");
  return (article && turnsByElement.get(article)) || null;
}

// Built on first use: the first Intl.DateTimeFormat of a page costs tens of milliseconds,
// so a loaded transcript writes its times after it is on screen (fillTimes).
let formats = null;

function write(node) {
  formats ??= {
    clock: new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit" }),
    day: new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" }),
    full: new Intl.DateTimeFormat(undefined, { dateStyle: "full", timeStyle: "long" }),
  };
  const at = new Date(node.dateTime);
  node.textContent = (at.toDateString() === new Date().toDateString() ? formats.clock : formats.day).format(at);
  node.title = formats.full.format(at);
}

/** Write the times under `root` that are not written yet. */
export function fillTimes(root) {
  for (const node of root.querySelectorAll("time.msg-time[datetime]:not([title])")) write(node);
}

/** A message's time: the clock for today, the date too for earlier days, all of it on hover. */
function timeEl(iso) {
  const node = el("time", "msg-time");
  const at = new Date(iso || NaN);
  if (Number.isNaN(at.getTime())) return node; // not known: no time rather than a wrong one
  node.dateTime = at.toISOString();
  if (formats) write(node);
  return node;
}

/** A row of message actions; each button names its action in `data-action` (chat-actions.js). */
function actions(time, ...entries) {
  const row = el("div", "msg-actions");
  row.append(time);
  for (const [action, text, label] of entries) {
    const control = button(text, `msg-action ${action}`, () => {}, label);
    control.dataset.action = action;
    row.append(control);
  }
  return row;
}

/** `‹ 2/3 ›` for a message or answer with versions (their turn ids, this turn's among them); null with one. */
function versionNav(ids, current, what) {
  const index = (ids || []).indexOf(current);
  if (ids.length < 2 || index < 0) return null;
  const nav = el("span", "versions");
  nav.setAttribute("role", "group");
  nav.setAttribute("aria-label", `Versions of this ${what}`);
  const step = (text, label, target) => {
    const control = button(text, "msg-action version-step", () => {}, label);
    control.dataset.action = "version";
    control.dataset.target = target || "";
    control.disabled = !target;
    return control;
  };
  const count = el("span", "version-count", `${index + 1}/${ids.length}`);
  count.setAttribute("aria-label", `Version ${index + 1} of ${ids.length}`);
  nav.append(
    step("‹", `Previous version of this ${what}`, ids[index - 1]),
    count,
    step("›", `Next version of this ${what}`, ids[index + 1]),
  );
  return nav;
}

export class Turn {
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
    this.userText = null; // what the owner wrote, for Edit, Retry and Regenerate
    this.answerVersions = []; // the turns of this answer's versions (GET messages' `answer_versions`)
    turnsByElement.set(this.el, this);
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
    this.userText = textOf(message.parts);
    bubble.textContent = this.userText;
    // A message a scheduled task sent for the owner says so (PROTOCOL.md addition: `source`).
    const source = (message.parts || []).find((p) => p.type === "text" && p.source && p.source.kind === "task")?.source;
    bubble.hidden = !this.userText; // a message of only files shows only their chips
    const files = attachmentChips(message.parts);
    if (source) {
      this.userEl.dataset.source = "task";
      this.userEl.replaceChildren(el("div", "source", `Scheduled task: ${source.name || ""}`), bubble);
    } else {
      this.userEl.replaceChildren(bubble);
    }
    if (files) this.userEl.append(files);
    const row = actions(
      timeEl(message.created_at),
      ["copy", "Copy", "Copy message"],
      ["edit", "Edit", "Edit and send as a new message"],
    );
    row.classList.add("user-actions");
    const versions = versionNav(message.versions || [], message.turn_id, "message");
    if (versions) row.firstChild.after(versions);
    if (this.userActionsEl) this.userActionsEl.replaceWith(row);
    else this.userEl.after(row);
    this.userActionsEl = row;
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
    this.ensureActions(new Date().toISOString()); // an answer starting now; the stored time replaces it
  }

  /** The row under the answer (or under a failed turn's note): its time and actions. */
  ensureActions(createdAt = null) {
    if (this.actionsEl) {
      if (createdAt) this.actionsEl.firstChild.replaceWith(timeEl(createdAt));
      return;
    }
    this.actionsEl = actions(
      timeEl(createdAt),
      ["copy", "Copy", "Copy answer as Markdown"],
      ["regenerate", "Regenerate", "Regenerate answer"],
      ["retry", "Retry", "Retry this message"],
    );
    this.actionsEl.classList.add("answer-actions");
    const versions = versionNav(this.answerVersions, this.id, "answer");
    if (versions) this.actionsEl.firstChild.after(versions);
    this.el.append(this.actionsEl);
  }

  /** Show the versions of the answer (on its row once there is one). */
  setAnswerVersions(ids) {
    this.answerVersions = ids || [];
    if (!this.actionsEl) return;
    this.actionsEl.querySelector(".versions")?.remove();
    const versions = versionNav(this.answerVersions, this.id, "answer");
    if (versions) this.actionsEl.firstChild.after(versions);
  }

  setAssistant(message) {
    this.ensureAssistant();
    this.ensureActions(message.created_at);
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
    const files = attachmentChips(this.parts); // files the answer brought back
    if (files) nodes.push(files);
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
      if (textEl === node) {
        node.replaceChildren(renderMarkdown(this.parts[index].text || ""));
        decorateCode(node);
      }
    }
  }

  /** The answer as Markdown: its text parts, in order. */
  markdown() {
    return this.parts
      .filter((part) => part.type === "text" && part.text)
      .map((part) => part.text)
      .join("\n\n");
  }

  setStatus(status, error = null) {
    this.status = status;
    this.error = error;
    this.el.classList.toggle("active", this.active);
    for (const card of this.cards.values()) card.setTurnActive(this.active);
    if (this.active) this.ensureAssistant();
    this.refresh();
  }

  /** Show the thinking dots and the closing note that fit the turn's status. */
  refresh() {
    if (this.assistantEl) {
      const visible =
        this.parts.some((p) => (p.type === "text" && p.text) || p.type === "tool" || p.type === "attachment") ||
        this.cards.size;
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
      note = el("div", "turn-note cancelled");
      note.append(el("span", "", "Stopped."));
    }

    if (note) note.dataset.turnId = this.id || "";
    if (this.noteEl) this.noteEl.remove();
    this.noteEl = note;
    if (note) this.el.append(note);
    if (this.status !== null) {
      // Actions come last, under the note; which of them fit the turn's status.
      this.ensureActions();
      this.el.append(this.actionsEl);
      const ended = this.status === "failed" || this.status === "cancelled";
      const asked = this.userText !== null && !this.userEl?.dataset.source;
      this.actionsEl.hidden = this.active;
      this.actionsEl.querySelector(".copy").hidden = !this.markdown();
      this.actionsEl.querySelector(".regenerate").hidden = !(asked && this.status === "completed");
      this.actionsEl.querySelector(".retry").hidden = !(asked && ended);
    }
  }
}

export function textOf(parts) {
  return (parts || [])
    .filter((part) => part.type === "text")
    .map((part) => part.text)
    .join("");
}
