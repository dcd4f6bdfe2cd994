// DOM helpers every page shares; no state, nothing runs on import.

/** Numbers as the pages show them: "16,000". */
export const numbers = new Intl.NumberFormat("en-US");

export function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

export function button(text, className, onClick, label) {
  const node = el("button", className, text);
  node.type = "button";
  if (label) node.setAttribute("aria-label", label);
  node.addEventListener("click", onClick);
  return node;
}

/** A <time> of an instant in the browser's zone. */
export function localTime(iso) {
  const node = el("time", "", new Date(iso).toLocaleString());
  node.dateTime = iso;
  return node;
}

/** A random UUID, also where crypto.randomUUID is missing (plain HTTP). */
export function newId() {
  if (crypto.randomUUID) return crypto.randomUUID();
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  bytes[6] = (bytes[6] & 0x0f) | 0x40;
  bytes[8] = (bytes[8] & 0x3f) | 0x80;
  const hex = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** "1,234 / 16,000": a length against its limit. */
export function countText(length, limit) {
  return `${numbers.format(length)} / ${numbers.format(limit)}`;
}

/** Show a draft's length against the server's limit (UTF-16 code units, its unit) and how far over. */
export function showCount(counter, text, limit) {
  const over = text.length - limit;
  counter.textContent = countText(text.length, limit) + (over > 0 ? ` (${numbers.format(over)} over)` : "");
  counter.dataset.over = over > 0 ? "1" : "";
}
