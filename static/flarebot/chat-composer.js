// The composer: a message's text, its length against the server's limit, its attachments
// (chat-attachments.js), sending it (a conversation comes to exist with its first message),
// and the errors that refuse it. Send is disabled while a file is uploading.

import { MAX_CHARS, reportError, state, ui } from "./chat-shell.js";
import { createConversation } from "./chat-sidebar.js";
import { clearBeforeSending } from "./chat-header.js";
import { countText, numbers } from "./dom.js";
import {
  clearAttachments,
  hasAttachments,
  onAttachmentsChange,
  readyAttachments,
  uploading,
} from "./chat-attachments.js";

export function showComposerError(message) {
  ui.error.textContent = message;
  ui.error.hidden = false;
}

export function hideComposerError() {
  ui.error.hidden = true;
  ui.error.textContent = "";
}

function autosize() {
  ui.input.style.height = "auto";
  ui.input.style.height = `${Math.min(ui.input.scrollHeight, window.innerHeight * 0.4)}px`;
}

export function composerChanged() {
  autosize();
  const length = ui.input.value.length; // UTF-16 code units, as the server counts
  const over = length > MAX_CHARS;
  ui.count.hidden = length < MAX_CHARS * 0.9;
  ui.count.textContent = countText(length, MAX_CHARS);
  ui.count.classList.toggle("over", over);
  ui.input.setAttribute("aria-invalid", String(over));
  if (over) showComposerError(tooLongMessage(length));
  else if (ui.error.dataset.kind === "length") hideComposerError();
  ui.error.dataset.kind = over ? "length" : "";
  ui.send.disabled = uploading();
  ui.send.title = ui.send.disabled ? "Waiting for the files to upload" : "";
}
onAttachmentsChange(composerChanged);

function tooLongMessage(length) {
  const extra = numbers.format(length - MAX_CHARS);
  return `This message is too long: at most ${numbers.format(MAX_CHARS)} characters (${extra} over).`;
}

/** Drop surrounding blank lines and trailing spaces; indentation of the first line stays. */
function cleanText(text) {
  return text.replace(/^(?:[ \t]*\n)+/, "").trimEnd();
}

let creating = false;
export async function submitComposer() {
  const text = cleanText(ui.input.value);
  if (uploading()) return; // Send is disabled until every file is uploaded
  if (!text && !hasAttachments()) return;
  if (text.length > MAX_CHARS) {
    showComposerError(tooLongMessage(text.length));
    ui.error.dataset.kind = "length";
    return;
  }
  hideComposerError();
  if (!state.view) {
    if (creating) return;
    creating = true;
    try {
      await createConversation();
    } catch (error) {
      reportError(error);
      return;
    } finally {
      creating = false;
    }
  }
  // A clear of this history still waiting for its Undo goes first: it would remove this message too.
  const view = state.view;
  await clearBeforeSending(view.id);
  if (state.view !== view) return; // another conversation was shown meanwhile: the text stays
  const attachments = readyAttachments().map((item) => ({
    type: "attachment",
    id: item.id,
    name: item.name,
    media_type: item.type,
    size: item.size,
  }));
  ui.input.value = "";
  clearAttachments(); // a refused send puts them back (restoreAttachments)
  composerChanged();
  view.send(text, attachments);
}

ui.composer.addEventListener("submit", (event) => {
  event.preventDefault();
  submitComposer();
});
ui.input.addEventListener("input", composerChanged);
ui.input.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.altKey && !event.ctrlKey && !event.metaKey) {
    if (event.isComposing || event.keyCode === 229) return; // an input method is composing
    event.preventDefault();
    submitComposer();
  }
});
ui.stop.addEventListener("click", () => state.view && state.view.stop());
