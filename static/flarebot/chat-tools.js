// Tool activity cards: one per tool call, built from the activity contract (`A`) and the
// transcript's tool part joined by tool_call_id, so new tools need no page changes.
// Everything shown is text: labels, summaries and pretty JSON go into text nodes only.

import { SOURCE_TOOLS, upwardIntent } from "./chat-shell.js";
import { button, el } from "./dom.js";

const STATUS_TEXT = {
  pending: "Waiting",
  running: "Running",
  succeeded: "Done",
  failed: "Failed",
  cancelled: "Stopped",
  interrupted: "Interrupted",
  unavailable: "Unavailable",
};
const JSON_MAX = 20000;
const REASON_MAX = 160; // as a card's summary (tools/activity.py TEXT_MAX)

/** Return a person's label for a tool name: "read_url" -> "Read url". */
export function humanize(name) {
  const words = String(name || "tool").replace(/[_\-.]+/g, " ").trim();
  return words.charAt(0).toUpperCase() + words.slice(1);
}

/** Return a short duration: "80 ms", "2.4 s", "12 s", "3 min 5 s". */
export function formatDuration(ms) {
  if (typeof ms !== "number" || !Number.isFinite(ms) || ms < 0) return "";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 10000) return `${(ms / 1000).toFixed(1)} s`;
  const seconds = Math.round(ms / 1000);
  if (seconds < 60) return `${seconds} s`;
  return `${Math.floor(seconds / 60)} min ${seconds % 60} s`;
}

function prettyJson(value) {
  let text;
  try {
    text = typeof value === "string" ? value : JSON.stringify(value, null, 2);
  } catch {
    text = String(value);
  }
  if (text === undefined) text = "";
  return text.length > JSON_MAX ? `${text.slice(0, JSON_MAX)}\n… (shortened)` : text;
}

function text(value) {
  return typeof value === "string" ? value : "";
}

/**
 * The shell's card body: the command, then how it ended and what it printed, all as text
 * (textContent only; the output is whatever a program wrote and is never markup). A call
 * stopped by the owner carries what it printed so far in `partial`. How it ended is left
 * out when the card's summary above says it (`summarized`: "Exit code 0", once).
 */
export function shellBody(input, output, { summarized = false } = {}) {
  const nodes = [el("div", "tool-section", "Command"), el("pre", "tool-json tool-command", text(input?.command))];
  if (!output || typeof output !== "object") return nodes;
  const result = output.partial && typeof output.partial === "object" ? output.partial : output;
  if (!("stdout" in result) && !("stderr" in result) && !result.not_started) return nodes;
  const facts = [];
  if (result.not_started) facts.push("not started");
  if (typeof result.exit_code === "number") facts.push(`exit code ${result.exit_code}`);
  if (result.timed_out) facts.push("stopped at its time limit");
  if (output.partial) facts.push("stopped by you");
  if (result.truncated) facts.push("output cut at the limit");
  if (result.cleanup === "pending") facts.push("container removal pending");
  nodes.push(el("div", "tool-section", "Output"));
  if (facts.length && !summarized) nodes.push(el("p", "tool-facts", facts.join(" · ")));
  const stdout = text(result.stdout);
  const stderr = text(result.stderr);
  if (stdout) nodes.push(el("pre", "tool-json tool-stdout", stdout));
  if (stderr) nodes.push(el("pre", "tool-json tool-stderr", stderr));
  if (!stdout && !stderr && !result.not_started) nodes.push(el("p", "muted", "No output."));
  return nodes;
}

function lastLine(value) {
  const lines = text(value).split("\n").map((line) => line.trim()).filter(Boolean);
  const last = lines.length ? lines[lines.length - 1] : "";
  return last.length > REASON_MAX ? `${last.slice(0, REASON_MAX - 1)}…` : last;
}

/**
 * How a shell command that ran ended, for the card's header. The call itself succeeded; a
 * command that did not exit with 0 reads "Exited 3" in the warning colour (never the
 * success colour), with the last line it wrote to stderr as its reason. Null for exit 0.
 */
export function shellHead(output) {
  if (!output || typeof output !== "object") return null;
  const reason = lastLine(output.stderr);
  if (output.not_started) return { text: "Not started", tone: "warning", reason: "" };
  if (output.timed_out) return { text: "Timed out", tone: "warning", reason };
  if (typeof output.exit_code !== "number") return { text: "No exit code", tone: "warning", reason };
  if (output.exit_code !== 0) return { text: `Exited ${output.exit_code}`, tone: "warning", reason };
  return null;
}

// Tools whose card body is shaped for them; every other tool shows its input and result as JSON.
const BODIES = { shell: shellBody };
// Tools whose successful result can still say something went wrong (a command's exit code).
const HEADS = { shell: shellHead };
// Statuses whose card says why in its header, without being opened.
const SAYS_WHY = new Set(["failed", "unavailable", "interrupted"]);

const PROPOSAL_STATUS = { proposed: "pending", confirmed: "succeeded", dismissed: "cancelled" };
const PROPOSAL_STATUS_TEXT = { proposed: "Needs your confirmation", confirmed: "Confirmed", dismissed: "Dismissed" };
const PROPOSAL_STATE = {
  proposed: "Waiting for your confirmation: nothing was done yet.",
  confirmed: "Confirmed: done.",
  dismissed: "Dismissed: nothing was done.",
};

/**
 * The readback of a write a turn proposed after reading the web (a memory or task change):
 * what it would write, and Confirm / Dismiss while it waits. The buttons ask the view
 * (an event that bubbles: `flarebot:write-proposal`), which calls the API.
 */
export function proposalBody(proposal) {
  const box = el("div", "write-proposal");
  box.dataset.proposalId = proposal.id;
  box.dataset.state = proposal.state;
  const readback = proposal.readback || {};
  box.append(el("p", "write-proposal-why", "This conversation read content from the web, so Flarebot asks first."));
  box.append(el("p", "write-proposal-title", text(readback.title) || "A change"));
  const lines = el("ul", "write-proposal-lines");
  for (const line of Array.isArray(readback.lines) ? readback.lines : []) lines.append(el("li", "", text(line)));
  box.append(lines);
  let state = PROPOSAL_STATE[proposal.state] || proposal.state;
  const result = proposal.result;
  if (proposal.state === "confirmed" && result && result.ok === false) state = `Confirmed, but not done: ${text(result.message)}`;
  const said = el("p", "write-proposal-state", state);
  said.setAttribute("role", "status");
  box.append(said);
  if (proposal.state === "proposed") {
    const actions = el("div", "write-proposal-actions");
    for (const [label, decision, className] of [
      ["Confirm", "confirm", "primary"],
      ["Dismiss", "dismiss", ""],
    ]) {
      actions.append(
        button(label, className, () => {
          for (const each of actions.querySelectorAll("button")) each.disabled = true;
          const detail = { proposalId: proposal.id, decision, said };
          box.dispatchEvent(new CustomEvent("flarebot:write-proposal", { bubbles: true, detail }));
        }),
      );
    }
    box.append(actions);
  }
  return box;
}

export class ToolCard {
  constructor(toolCallId) {
    this.toolCallId = toolCallId;
    this.part = null; // the transcript's tool part: name, input, output, status
    this.activity = null; // the activity contract's A
    this.progress = null; // the latest tool.progress before an activity carried it
    this.turnActive = true;

    this.el = el("details", "tool-card");
    this.el.dataset.toolCallId = toolCallId;
    const summary = el("summary", "tool-head");
    this.dot = el("span", "tool-dot");
    this.dot.setAttribute("aria-hidden", "true");
    this.label = el("span", "tool-label");
    this.status = el("span", "tool-status");
    this.progressText = el("span", "tool-progress");
    this.progressBar = el("progress", "tool-bar");
    this.duration = el("span", "tool-duration");
    this.reason = el("span", "tool-reason"); // why it failed, on a line of its own
    this.reason.hidden = true;
    this.hint = el("span", "tool-hint"); // what an operator can do about it (the model never sees it)
    this.hint.hidden = true;
    this.tail = el("span", "tool-tail"); // the last line printed so far, while it runs
    this.tail.hidden = true;
    this.interrupted = el("span", "tool-interrupted"); // the latest interruption, and that it ran again
    this.interrupted.hidden = true;
    this.outcome = el("span", "tool-outcome"); // what came of a call that succeeded, while folded
    this.outcome.hidden = true;
    const heads = [this.dot, this.label, this.status, this.progressText, this.progressBar, this.duration];
    summary.append(...heads, this.reason, this.outcome, this.hint, this.interrupted, this.tail);
    this.body = el("div", "tool-body");
    this.el.append(summary, this.body);
    this.bodyStale = true;
    this.el.addEventListener("toggle", () => this.el.open && this.renderBody());

    // What the running call printed so far (the activity's `progress.output`): events carry
    // only what is new, from `start` (UTF-16 units, as JS strings count); `liveEnd` is where
    // the text reached. `liveEl` is kept across renders so its scroll position survives.
    this.live = "";
    this.liveEnd = 0;
    this.liveEl = null;
    this.liveFollow = true; // the block follows the end until the owner scrolls up
  }

  setPart(part) {
    this.part = part;
    this.update();
  }

  setActivity(activity) {
    const before = this.activity;
    this.activity = activity;
    this.takeOutput(activity?.progress?.output);
    // Output alone changes the live block, not the rest of the body.
    const same = before && ["status", "summary", "hint"].every((key) => before[key] === activity[key]);
    this.update(!same);
  }

  setProgress(progress) {
    this.progress = progress;
    this.update(false);
  }

  /**
   * Add a piece of the output. One that starts past what the card holds (it loaded between
   * two events) follows a "…" line until the stored card, which has all of it, fills the gap.
   */
  takeOutput(output) {
    if (!output || typeof output.text !== "string" || typeof output.start !== "number" || output.start < 0) return;
    if (output.start <= this.liveEnd) {
      const keep = Math.max(0, this.live.length - (this.liveEnd - output.start));
      this.live = this.live.slice(0, keep) + output.text;
    } else {
      this.live = `${this.live}${this.live && !this.live.endsWith("\n") ? "\n" : ""}…\n${output.text}`;
      // The view reads the stored card again (once this card is on the page).
      const gap = new CustomEvent("flarebot:output-gap", { bubbles: true, detail: { card: this } });
      setTimeout(() => this.el.dispatchEvent(gap));
    }
    this.liveEnd = output.start + output.text.length;
  }

  /** Whether the card shows what the call printed so far: it has not handed back its result. */
  showsLive() {
    return Boolean(this.live) && (this.part?.output == null) && !this.proposal();
  }

  liveBlock() {
    if (!this.liveEl) {
      const pre = el("pre", "tool-json tool-live");
      pre.tabIndex = 0; // a scrolling region the keyboard can reach
      pre.setAttribute("aria-label", "Output so far");
      pre.addEventListener("scroll", () => {
        this.liveFollow = pre.scrollHeight - pre.scrollTop - pre.clientHeight < 8;
      });
      // Scrolling up says so before the first scroll event: a line arriving in between
      // would otherwise put the block back at its end and cancel the scroll.
      upwardIntent(pre, () => (this.liveFollow = false), { beforeScrolling: true });
      this.liveEl = pre;
    }
    return this.liveEl;
  }

  /** Put the output into the live block; keep it at the end unless the owner scrolled up. */
  showLive(savedTop) {
    const pre = this.liveEl;
    if (!pre || !pre.isConnected) return;
    if (pre.textContent !== this.live) pre.textContent = this.live;
    if (this.liveFollow) pre.scrollTop = pre.scrollHeight;
    else if (savedTop !== undefined) pre.scrollTop = savedTop;
  }

  setTurnActive(active) {
    if (this.turnActive === active) return;
    this.turnActive = active;
    this.update();
  }

  currentStatus() {
    if (this.activity?.status) return this.activity.status;
    if (this.part?.status) return this.part.status;
    if (this.part && this.part.output != null) return "succeeded";
    return this.turnActive ? "running" : "interrupted";
  }

  update(bodyChanged = true) {
    const proposal = this.proposal();
    // A proposed write did not fail: it waits for the owner, who then decides its outcome.
    const status = proposal ? PROPOSAL_STATUS[proposal.state] || "pending" : this.currentStatus();
    this.el.dataset.status = status;
    this.label.textContent = this.activity?.label || humanize(this.part?.name);
    const head = !proposal && status === "succeeded" ? HEADS[this.part?.name]?.(this.part.output) : null;
    if (head) this.el.dataset.tone = head.tone;
    else delete this.el.dataset.tone;
    this.status.textContent = proposal
      ? PROPOSAL_STATUS_TEXT[proposal.state] || ""
      : head?.text || STATUS_TEXT[status] || humanize(status);
    const reason = head ? head.reason : !proposal && SAYS_WHY.has(status) ? this.failure() : "";
    this.reason.textContent = reason;
    this.reason.hidden = !reason;
    // A call that succeeded says what came of it on the folded card too ("Scheduled “Digest”,
    // next run ..."), in its summary's words; open, the body says it (chat.css hides this).
    const outcome = !proposal && !head && status === "succeeded" ? text(this.activity?.summary) : "";
    this.outcome.textContent = outcome;
    this.outcome.hidden = !outcome;
    const hint = typeof this.activity?.hint === "string" ? this.activity.hint : "";
    this.hint.textContent = hint;
    this.hint.hidden = !hint;
    this.showInterruption(status);

    const progress = this.activity?.progress || this.progress;
    const running = status === "running" || status === "pending";
    const done = typeof progress?.done === "number" ? progress.done : null;
    const total = typeof progress?.total === "number" && progress.total > 0 ? progress.total : null;
    const counts = done !== null ? (total !== null ? `${done}/${total}` : `${done}`) : "";
    const message = typeof progress?.message === "string" ? progress.message : "";
    this.progressText.textContent = running ? [counts, message].filter(Boolean).join(" · ") : "";
    this.progressBar.hidden = !(running && total !== null && done !== null);
    if (!this.progressBar.hidden) {
      this.progressBar.max = total;
      this.progressBar.value = Math.min(done, total);
    }

    let ms = this.activity?.duration_ms;
    if (typeof ms !== "number" && this.activity?.started_at && this.activity?.finished_at) {
      ms = Date.parse(this.activity.finished_at) - Date.parse(this.activity.started_at);
    }
    this.duration.textContent = running ? "" : formatDuration(ms);
    const tail = running && this.showsLive() ? lastLine(this.live) : "";
    this.tail.textContent = tail;
    this.tail.hidden = !tail;

    if (proposal?.state === "proposed" && !this.openedForProposal) {
      this.openedForProposal = true;
      this.el.open = true; // what waits for the owner is shown, not folded away
    }
    if (bodyChanged || this.showsLive() !== Boolean(this.liveEl?.isConnected)) this.bodyStale = true;
    if (!this.el.open) return;
    if (this.bodyStale) this.renderBody();
    else this.showLive();
  }

  /** "Interrupted at 14:02" (and ", run again" once it ran again) when the call's worker died mid-call. */
  showInterruption(status) {
    const at = this.activity?.interrupted_at;
    const when = at ? new Date(at) : null;
    if (!when || Number.isNaN(when.getTime())) {
      this.interrupted.hidden = true;
      return;
    }
    const time = el("time", "", when.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }));
    time.dateTime = at;
    time.title = when.toLocaleString();
    const again = status === "interrupted" ? "" : ", run again";
    this.interrupted.replaceChildren("Interrupted at ", time, again);
    this.interrupted.hidden = false;
  }

  /** The one-line reason of a call that did not succeed: its card's summary, else its own message. */
  failure() {
    const output = this.part?.output;
    const message = output && typeof output === "object" && typeof output.message === "string" ? output.message : "";
    return this.activity?.summary || message.slice(0, REASON_MAX);
  }

  proposal() {
    const output = this.part?.output;
    return output && typeof output === "object" && output.proposal && typeof output.proposal === "object"
      ? output.proposal
      : null;
  }

  renderBody() {
    if (!this.bodyStale) return;
    this.bodyStale = false;
    const nodes = [];
    const summary = this.activity?.summary;
    const status = this.currentStatus();
    const output = this.part?.output;
    const proposal = this.proposal();
    if (proposal) nodes.push(proposalBody(proposal));
    const failure =
      !proposal && output && typeof output === "object" && typeof output.message === "string" ? output.message : "";
    // A card's summary is cut at 160 characters; when it is the start of the call's own
    // failure message (an operator's fix, say), the body shows that message whole.
    const cut = summary && summary.endsWith("…") && failure.startsWith(summary.slice(0, -1));
    if (proposal) {
      // the readback says what happens; the card's summary would only repeat it
    } else if (cut && status !== "succeeded") nodes.push(el("p", "tool-summary error", failure));
    else if (summary) nodes.push(el("p", status === "succeeded" ? "tool-summary" : "tool-summary error", summary));
    else if (failure && status !== "succeeded") nodes.push(el("p", "tool-summary error", failure));
    if (proposal) {
      // the readback is what the owner decides on; the raw input and result add nothing
    } else if (this.part && BODIES[this.part.name]) {
      const summarized = status === "succeeded" && Boolean(summary);
      nodes.push(...BODIES[this.part.name](this.part.input, output, { summarized }));
    } else if (this.part) {
      nodes.push(el("div", "tool-section", "Input"), el("pre", "tool-json", prettyJson(this.part.input ?? {})));
      if (output != null) nodes.push(el("div", "tool-section", "Result"), el("pre", "tool-json", prettyJson(output)));
    }
    const live = this.showsLive();
    if (live) nodes.push(el("div", "tool-section", "Output so far"), this.liveBlock());
    if (!nodes.length) nodes.push(el("p", "muted", "No details yet."));
    const savedTop = this.liveEl ? this.liveEl.scrollTop : undefined;
    this.body.replaceChildren(...nodes);
    if (live) this.showLive(savedTop);
  }
}

// Sources of a turn: what the tools that cite sources read or found, from their tool parts' outputs.
const SOURCES_MAX = 30;

/** Return the turn's distinct web sources: [{url, title, host}], only http(s) URLs. */
export function sourcesOf(parts) {
  const found = new Map();
  for (const part of parts || []) {
    if (part.type !== "tool" || !SOURCE_TOOLS.has(part.name)) continue;
    const output = part.output;
    if (!output || typeof output !== "object" || output.ok === false || !Array.isArray(output.sources)) continue;
    for (const source of output.sources) {
      if (found.size >= SOURCES_MAX) return [...found.values()];
      if (!source || typeof source.final_url !== "string") continue;
      let url;
      try {
        url = new URL(source.final_url);
      } catch {
        continue;
      }
      if ((url.protocol !== "http:" && url.protocol !== "https:") || url.username || url.password) continue;
      if (found.has(url.href)) continue;
      const title = typeof source.title === "string" && source.title.trim() ? source.title.trim() : url.host;
      found.set(url.href, { url: url.href, title: title.slice(0, 240), host: url.host });
    }
  }
  return [...found.values()];
}

/** Build the compact source list shown under an answer (DOM nodes only; null when empty). */
export function renderSources(sources) {
  if (!sources.length) return null;
  const box = el("nav", "sources");
  box.setAttribute("aria-label", "Sources");
  box.append(el("div", "sources-title", "Sources"));
  const list = el("ol", "sources-list");
  for (const source of sources) {
    const link = el("a", "source-link");
    link.href = source.url;
    link.target = "_blank";
    link.rel = "noopener noreferrer";
    link.append(el("span", "source-title", source.title), el("span", "source-host", source.host));
    const item = el("li", "source");
    item.append(link);
    list.append(item);
  }
  box.append(list);
  return box;
}
