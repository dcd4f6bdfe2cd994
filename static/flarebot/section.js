// What the settings page's list sections (memory.js, tasks.js) share: one operation at a
// time, the count badge against the server's limit, items cloned from a template, and a
// list kept in line with the server's rows without moving a node that has the focus.
import { numbers } from "./dom.js";

/**
 * One operation at a time over a section. Buttons stay focusable (a keyboard user keeps
 * their place); presses while another operation runs are ignored. `settle` runs after each.
 */
export function oneAtATime(root, settle) {
  const gate = {
    busy: false,
    async run(operation) {
      if (gate.busy) return;
      gate.busy = true;
      root.setAttribute("aria-busy", "true");
      try {
        await operation();
      } finally {
        gate.busy = false;
        root.setAttribute("aria-busy", "false");
        settle();
      }
    },
    /** The section's first load; rejects, after `failed(error)` said so in the section, when it failed. */
    async first(load, failed) {
      gate.busy = true;
      try {
        await load();
      } catch (error) {
        failed(error);
        throw error;
      } finally {
        gate.busy = false;
        settle();
      }
    },
  };
  return gate;
}

/** "12 of 200 facts", with `data-state` unknown (not loaded), ok, near (90 %) or full. */
export function showCountBadge(badge, { loaded, count, max, noun }) {
  badge.textContent = loaded ? `${numbers.format(count)} of ${numbers.format(max)} ${noun}` : "…";
  badge.dataset.state = !loaded ? "unknown" : count >= max ? "full" : count >= max * 0.9 ? "near" : "ok";
}

/** Clone a list item from its <template>; `part(role)` finds an element by its data-role. */
export function fromTemplate(template) {
  const node = template.content.firstElementChild.cloneNode(true);
  return { node, part: (role) => node.querySelector(`[data-role="${role}"]`) };
}

/** `rows` with `row` in place of the row of the same id. */
export function replaceRow(rows, row) {
  return rows.map((each) => (each.id === row.id ? row : each));
}

/** The row to move the focus to once the row at `index` is gone: the next, else the one before. */
export function rowAfterRemoval(rows, index) {
  return rows[index] || rows[index - 1];
}

/**
 * Bring `list` in line with `rows` (newest first), keeping `items` (row id -> {node}) and
 * moving no node that is already in its place: a moved node would lose the keyboard focus.
 * `create(row)` makes an item, `update(item, row)` shows a row again, `dropped(item)` is
 * told before an item goes.
 */
export function reconcile(list, items, rows, { create, update, dropped }) {
  const wanted = new Set(rows.map((row) => row.id));
  for (const [id, item] of items) {
    if (!wanted.has(id)) {
      if (dropped) dropped(item);
      item.node.remove();
      items.delete(id);
    }
  }
  let at = list.firstElementChild;
  for (const row of rows) {
    let item = items.get(row.id);
    if (!item) {
      item = create(row);
      items.set(row.id, item);
    } else {
      update(item, row);
    }
    if (item.node === at) at = at.nextElementSibling;
    else list.insertBefore(item.node, at);
  }
}
