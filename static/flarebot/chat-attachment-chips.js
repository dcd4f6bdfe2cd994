// A message's attachments in the transcript, the owner's or an answer's: a chip per file
// (name, size, type, a download link), an image as a small thumbnail that opens the viewer
// (the page's <dialog id="attachment-viewer">: the image large, its name, a download link;
// Esc or Close shuts it and focus goes back to the thumbnail). A download is named by the
// server (`download` left empty): a text file named `page.html` saves as `page.html.txt`.

import { el } from "./dom.js";

const viewer = document.getElementById("attachment-viewer");
const viewerImage = document.getElementById("attachment-viewer-image");
const viewerName = document.getElementById("attachment-viewer-name");
const viewerDownload = document.getElementById("attachment-viewer-download");
let opener = null;

/** "1.5 MB", "820 KB", "12 bytes". */
function sizeText(bytes) {
  if (bytes >= 1024 * 1024) return `${Math.round((bytes / (1024 * 1024)) * 10) / 10} MB`;
  if (bytes >= 1024) return `${Math.round(bytes / 1024)} KB`;
  return `${bytes} ${bytes === 1 ? "byte" : "bytes"}`;
}

const served = (part) => `/api/attachments/${encodeURIComponent(part.id)}/`;
const isImage = (part) => String(part.media_type || "").startsWith("image/");

function chip(part) {
  const name = String(part.name || "attachment");
  const item = el("li", "file-chip");
  item.dataset.attachmentId = part.id;
  if (isImage(part)) {
    const open = el("button", "file-thumb");
    open.type = "button";
    open.setAttribute("aria-label", `View ${name}`);
    const image = el("img");
    image.src = served(part);
    image.alt = name;
    image.loading = "lazy";
    image.width = 96;
    image.height = 72;
    open.append(image);
    open.addEventListener("click", () => openViewer(part, open));
    item.append(open);
  }
  const link = el("a", "file-link", name);
  link.href = served(part);
  link.download = "";
  link.title = `Download ${name}`;
  item.append(link, el("span", "file-meta", `${sizeText(Number(part.size) || 0)} · ${part.media_type || ""}`));
  return item;
}

/** The chips of a message's attachment parts, or null when it has none. */
export function attachmentChips(parts) {
  const files = (parts || []).filter((part) => part && part.type === "attachment" && part.id);
  if (!files.length) return null;
  const list = el("ul", "file-chips");
  list.setAttribute("aria-label", "Attached files");
  list.append(...files.map(chip));
  return list;
}

/**
 * The attachment parts a finished call hands back (a shell command's /workspace/out/ files):
 * the answer holds them after the call's part, as the server records them
 * (conversations/engine/tool_calls.py `_returned_attachments`), so they show when the call ends.
 */
export function returnedAttachments(status, output) {
  if (status !== "succeeded" || !output || !Array.isArray(output.attachments)) return [];
  return output.attachments.filter((part) => part && part.type === "attachment" && part.id).map((part) => ({ ...part }));
}

function openViewer(part, from) {
  opener = from;
  const name = String(part.name || "attachment");
  viewerImage.src = served(part);
  viewerImage.alt = name;
  viewerName.textContent = name;
  viewerDownload.href = served(part);
  viewerDownload.download = "";
  viewer.showModal();
}

viewer.addEventListener("close", () => {
  viewerImage.removeAttribute("src");
  if (opener && opener.isConnected) opener.focus();
  opener = null;
});

// Esc closes the viewer and nothing else (the page's Esc would otherwise stop an answer).
viewer.addEventListener("keydown", (event) => {
  if (event.key !== "Escape") return;
  event.preventDefault();
  viewer.close();
});
