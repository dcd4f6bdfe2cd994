// The composer's attachments: files chosen with Attach, dropped on the chat or pasted (an
// image from the clipboard), each uploaded at once and shown as a chip above the message box
// (name, size, type, a progress bar, Remove). A file goes to the selected conversation, or in
// a new chat to none: attaching creates no conversation (the first message does, and claims
// the file), and removing a chip deletes its upload, so an unsent new chat leaves nothing
// behind. The limits are the server's (the template's data attributes); the type is the
// server's too, decided from the content: a refused file keeps its chip with the server's
// message and is never sent. Send waits for nothing: it is disabled while a file uploads.

import { ANSWER_WITHIN_MS, api } from "./api.js";
import { app, state, ui } from "./chat-shell.js";
import { button, el, numbers } from "./dom.js";

// Limits come from the server (attachments/limits.py through the template).
const FILE_MAX = Number(app.dataset.maxFileBytes);
const FILES_MAX = Number(app.dataset.maxMessageFiles);
const BYTES_MAX = Number(app.dataset.maxMessageBytes);

const list = document.getElementById("attachments");
const picker = document.getElementById("attach-input");
const attachButton = document.getElementById("attach");

/**
 * Each chip's file: {key, conversationId, name, size, type, state, id?, request?, file?, retry?, el, bar, said};
 * `conversationId` is null for a file attached in a new chat, which any conversation's message may take.
 */
let items = [];
let onChange = () => {};

/** Tell the composer when the set of files (or their states) changed. */
export function onAttachmentsChange(callback) {
  onChange = callback;
}

const csrfToken = () => document.querySelector("input[name=csrfmiddlewaretoken]")?.value || "";

/** "1.5 MB", "820 KB", "12 bytes". */
export function sizeText(bytes) {
  if (bytes >= 1024 * 1024) return `${numbers.format(Math.round((bytes / (1024 * 1024)) * 10) / 10)} MB`;
  if (bytes >= 1024) return `${numbers.format(Math.round(bytes / 1024))} KB`;
  return `${numbers.format(bytes)} ${bytes === 1 ? "byte" : "bytes"}`;
}

const mb = (bytes) => `${numbers.format(bytes / (1024 * 1024))} MB`;

/** The files that will go with the message: uploaded (to this conversation or to none) and accepted. */
export function readyAttachments() {
  return items.filter(
    (item) => item.state === "ready" && (item.conversationId === null || item.conversationId === state.currentId),
  );
}

export function uploading() {
  return items.some((item) => item.state === "uploading");
}

/** Whether a message could go with no text: at least one file is ready. */
export function hasAttachments() {
  return readyAttachments().length > 0;
}

/** Clear every chip after a send (their files went with the message); uploads still running are stopped. */
export function clearAttachments() {
  for (const item of items) if (item.request) item.request.abort();
  items = [];
  list.replaceChildren();
  list.hidden = true;
  onChange();
}

/** Delete an upload that will not be sent; one the server keeps anyway (unreachable) goes with its sweep. */
function discard(item) {
  if (item.request) item.request.abort();
  if (item.id) api(`/api/attachments/${item.id}/`, { method: "DELETE" }).catch(() => {});
}

/**
 * The selected conversation changed: files uploaded to another one cannot go with its messages
 * and are dropped; those of a new chat (of no conversation yet) stay, for the next message.
 */
export function attachmentsFollow(conversationId) {
  const gone = items.filter((item) => item.conversationId !== null && item.conversationId !== conversationId);
  if (!gone.length) return;
  for (const item of gone) {
    discard(item);
    item.el.remove();
  }
  items = items.filter((item) => !gone.includes(item));
  list.hidden = items.length === 0;
  onChange();
}

/** Put back the files of a message the server refused (as they were, uploaded). */
export function restoreAttachments(parts) {
  if (!parts.length || items.length) return;
  for (const part of parts) {
    const item = chip({ name: part.name, size: part.size, type: part.media_type }, state.currentId);
    Object.assign(item, { id: part.id, state: "ready" });
    show(item);
  }
  onChange();
}

function chip(file, conversationId) {
  const item = { key: crypto.randomUUID(), conversationId, name: file.name || "pasted image", size: file.size };
  item.type = file.type || "unknown type";
  item.state = "uploading";
  item.el = el("li", "attach-chip");
  item.bar = el("progress", "attach-progress");
  item.bar.max = 100;
  item.bar.value = 0;
  item.bar.setAttribute("aria-label", `Uploading ${item.name}`);
  item.said = el("span", "attach-said");
  items.push(item);
  list.append(item.el);
  list.hidden = false;
  return item;
}

function show(item) {
  item.el.dataset.state = item.state;
  const name = el("span", "attach-name", item.name);
  name.title = item.name;
  const meta = el("span", "attach-meta", `${sizeText(item.size)} · ${item.type}`);
  const remove = button("×", "attach-remove", () => removeItem(item), `Remove ${item.name}`);
  const parts = [name, meta];
  if (item.state === "uploading") parts.push(item.bar);
  if (item.state === "refused") {
    item.said.setAttribute("role", "alert");
    parts.push(item.said);
    // What the server never answered (or answered with its own failure) may go again.
    if (item.retry) parts.push(button("Retry", "attach-retry", () => upload(item, item.file), `Retry ${item.name}`));
  }
  item.el.replaceChildren(...parts, remove);
}

function removeItem(item) {
  discard(item);
  const index = items.indexOf(item);
  items = items.filter((other) => other !== item);
  item.el.remove();
  list.hidden = items.length === 0;
  // Focus stays in the list: the next chip's Remove, else the Attach button.
  const next = items[Math.min(index, items.length - 1)];
  (next ? next.el.querySelector(".attach-remove") : attachButton).focus();
  onChange();
}

function refuse(item, message, { retry = false } = {}) {
  item.state = "refused";
  item.request = null;
  item.retry = retry;
  item.said.textContent = message;
  show(item);
  onChange();
}

/** Which limit a new file would break, as the owner reads it; null when it may go. */
function overLimit(file) {
  const counted = items.filter((item) => item.state !== "refused");
  if (counted.length >= FILES_MAX) return `Not attached: at most ${FILES_MAX} files a message.`;
  if (file.size > FILE_MAX) return `Not attached: a file may be at most ${mb(FILE_MAX)}.`;
  const total = counted.reduce((sum, item) => sum + item.size, 0) + file.size;
  if (total > BYTES_MAX) return `Not attached: the files of a message may be at most ${mb(BYTES_MAX)} in all.`;
  return null;
}

/** Attach files: each gets a chip; those within the limits are uploaded (in a new chat, to no conversation). */
export function attachFiles(files) {
  files = [...files];
  if (!files.length) return;
  const id = state.view ? state.view.id : null;
  for (const file of files) {
    const reason = overLimit(file);
    const item = chip(file, id);
    if (reason) refuse(item, reason);
    else upload(item, file);
  }
  onChange();
}

// Like every other call of the pages (api.js), an upload is abandoned when the server has
// not answered within ANSWER_WITHIN_MS: counted from its last progress, so a large file on
// a slow link goes on while its bytes move. It can then be tried again (Retry).
function upload(item, file) {
  Object.assign(item, { file, state: "uploading", retry: false });
  item.bar.value = 0;
  show(item);
  onChange();
  const request = new XMLHttpRequest();
  item.request = request;
  let timer = 0;
  const giveUp = () => {
    request.abort();
    if (items.includes(item)) {
      refuse(item, `Not attached: the server did not answer within ${ANSWER_WITHIN_MS / 1000} s.`, { retry: true });
    }
  };
  const waitForAnswer = () => {
    clearTimeout(timer);
    timer = setTimeout(giveUp, ANSWER_WITHIN_MS);
  };
  const to = item.conversationId ? `/api/conversations/${item.conversationId}/attachments/` : "/api/attachments/";
  request.open("POST", to);
  request.setRequestHeader("X-CSRFToken", csrfToken());
  request.setRequestHeader("Accept", "application/json");
  request.responseType = "json";
  request.upload.addEventListener("progress", (event) => {
    waitForAnswer();
    if (event.lengthComputable) item.bar.value = Math.round((event.loaded / event.total) * 100);
  });
  request.addEventListener("loadend", () => clearTimeout(timer));
  request.addEventListener("load", () => {
    if (!items.includes(item)) return;
    const body = request.response || {};
    if (request.status === 201) {
      Object.assign(item, { id: body.id, name: body.name, type: body.media_type, size: body.size });
      item.state = "ready";
      item.request = null;
      item.bar.value = 100;
      show(item);
      onChange();
    } else if (request.status === 401) {
      location.assign(`/login/?next=${encodeURIComponent(location.pathname + location.search)}`);
    } else {
      // The page decides by code: a refused type or size shows the server's own message.
      const error = body.error || {};
      const known = ["unsupported_type", "too_large", "invalid_upload", "name_too_long"].includes(error.code);
      if (known && error.message) refuse(item, error.message);
      else refuse(item, "Not attached: the upload failed.", { retry: request.status >= 500 || request.status === 0 });
    }
  });
  request.addEventListener("error", () => {
    if (items.includes(item)) refuse(item, "Not attached: the upload was cut off.", { retry: true });
  });
  const form = new FormData();
  form.append("file", file, item.name);
  request.send(form);
  waitForAnswer();
}

// --- where files come from --------------------------------------------------------------

attachButton.addEventListener("click", () => picker.click());
picker.addEventListener("change", () => {
  attachFiles(picker.files);
  picker.value = "";
});

ui.input.addEventListener("paste", (event) => {
  const files = [...(event.clipboardData?.files || [])];
  if (!files.length) return; // text is pasted as usual
  event.preventDefault();
  attachFiles(files);
});

const dropZone = document.querySelector(".main");
const carriesFiles = (event) => [...(event.dataTransfer?.types || [])].includes("Files");
dropZone.addEventListener("dragover", (event) => {
  if (!carriesFiles(event)) return;
  event.preventDefault();
  event.dataTransfer.dropEffect = "copy";
  dropZone.classList.add("dropping");
});
dropZone.addEventListener("dragleave", (event) => {
  if (!dropZone.contains(event.relatedTarget)) dropZone.classList.remove("dropping");
});
dropZone.addEventListener("drop", (event) => {
  dropZone.classList.remove("dropping");
  if (!event.dataTransfer?.files?.length) return;
  event.preventDefault();
  attachFiles(event.dataTransfer.files);
});
