// What the settings page's list sections (memory.js, tasks.js) share.
import { numbers } from "./dom.js";

// One operation at a time: buttons stay focusable (a keyboard user keeps their place) and
// presses while another operation runs are ignored. `settle` runs after each.
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
    /** The first load; rejects after `failed(error)` said why. */
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

/** "12 of 200 facts"; data-state unknown, ok, near (90 %) or full. */
export function showCountBadge(badge, { loaded, count, max, noun }) {
  badge.textContent = loaded ? `${numbers.format(count)} of ${numbers.format(max)} ${noun}` : "…";
  badge.dataset.state = !loaded ? "unknown" : count >= max ? "full" : count >= max * 0.9 ? "near" : "ok";
}

/** Clone an item from its <template>; `part(role)` finds an element by data-role. */
export function fromTemplate(template) {
  const node = template.content.firstElementChild.cloneNode(true);
  return { node, part: (role) => node.querySelector(`[data-role="${role}"]`) };
}

export function replaceRow(rows, row) {
  return rows.map((each) => (each.id === row.id ? row : each));
}

/** Where the focus goes once the row at `index` is gone. */
export function rowAfterRemoval(rows, index) {
  return rows[index] || rows[index - 1];
}

// Bring `list` in line with `rows` and `items` (id -> {node}), moving no node already in its
// place (a moved node would lose the keyboard focus).
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
