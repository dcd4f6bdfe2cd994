"""A page as the task's model reads it: title, URL, visible text and the interactive elements, numbered.

One fixed script runs in an isolated world of the main frame (the page's own scripts cannot
reach it or change what it sees). It numbers the visible, enabled interactive elements in
document order and keeps them in that world, so an action names an element by its number
and the session finds exactly that node again (`ELEMENT_CENTER` and friends). What the
model gets is `observation_text`: never the values of form fields, so nothing the owner
typed (a password during a sign-in) ever reaches it. Two more scripts read values, for the
owner's approval question only (`ELEMENT_FORM`, `PAGE_CONTROLS`): they go to
`submission.py`, which masks them, and never to the model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tools.web.extract import utf16_cut

TEXT_MAX = 12_000
ELEMENTS_MAX = 300
NAME_MAX = 120

# The one script that reads a page; it stores the numbered elements in its own world.
OBSERVE = """(() => {
  const SELECTOR = 'a[href], button, input, select, textarea, summary, [role=button], [role=link], ' +
    '[role=checkbox], [role=radio], [role=menuitem], [role=tab], [role=switch], [role=option], ' +
    '[role=combobox], [role=textbox], [contenteditable=""], [contenteditable=true]';
  const squash = (t) => String(t || '').replace(/\\s+/g, ' ').trim();
  const visible = (el) => {
    const r = el.getBoundingClientRect();
    if (r.width <= 0 || r.height <= 0) return false;
    const s = getComputedStyle(el);
    return s.visibility !== 'hidden' && s.display !== 'none';
  };
  const INPUT_ROLES = {button: 'button', submit: 'button', reset: 'button', image: 'button', file: 'button',
    checkbox: 'checkbox', radio: 'radio', range: 'slider', search: 'searchbox', number: 'spinbutton'};
  const roleOf = (el, tag, type) => {
    const explicit = el.getAttribute('role');
    if (explicit) return explicit.trim().split(/\\s+/)[0].toLowerCase();
    if (tag === 'a') return 'link';
    if (tag === 'button' || tag === 'summary') return 'button';
    if (tag === 'select') return el.multiple ? 'listbox' : 'combobox';
    if (tag === 'textarea') return 'textbox';
    if (tag === 'input') return INPUT_ROLES[type] || 'textbox';
    return el.isContentEditable ? 'textbox' : 'button';
  };
  const nameOf = (el, tag, type) => {
    const labelledby = el.getAttribute('aria-labelledby');
    if (labelledby) {
      const t = squash(labelledby.split(/\\s+/).map((id) => {
        const n = document.getElementById(id);
        return n ? n.textContent : '';
      }).join(' '));
      if (t) return t;
    }
    const aria = squash(el.getAttribute('aria-label'));
    if (aria) return aria;
    if (tag === 'input' && ['submit', 'button', 'reset'].includes(type)) {
      return squash(el.value) || (type === 'submit' ? 'Submit' : type === 'reset' ? 'Reset' : '');
    }
    if (tag === 'input' && type === 'image') return squash(el.alt) || 'Submit';
    if ((tag === 'input' || tag === 'select' || tag === 'textarea') && el.labels && el.labels.length) {
      const t = squash(Array.from(el.labels).map((l) => l.textContent).join(' '));
      if (t) return t;
    }
    if ((tag === 'input' || tag === 'textarea') && squash(el.placeholder)) return squash(el.placeholder);
    if (tag !== 'input' && tag !== 'select' && tag !== 'textarea') {
      const t = squash(el.innerText || el.textContent);
      if (t) return t;
      const img = el.querySelector('img[alt]');
      if (img && squash(img.alt)) return squash(img.alt);
    }
    return squash(el.title) || squash(el.getAttribute('name')) || '';
  };
  const kept = [];
  const elements = [];
  for (const el of document.querySelectorAll(SELECTOR)) {
    if (kept.length >= %(elements_max)d) break;
    if (el.disabled || !visible(el)) continue;
    const tag = el.tagName.toLowerCase();
    const type = tag === 'input' ? (el.getAttribute('type') || 'text').toLowerCase()
      : tag === 'button' ? (el.getAttribute('type') || 'submit').toLowerCase() : '';
    if (tag === 'input' && type === 'hidden') continue;
    const submit = !!el.form && ((tag === 'button' && type === 'submit') ||
      (tag === 'input' && (type === 'submit' || type === 'image')));
    kept.push(el);
    // What a person reads on the control comes first: an aria-label saying something else
    // ("Read more" on a visible "Buy now") is kept beside it, as `label`, and judged too.
    const label = nameOf(el, tag, type);
    const shown = (tag === 'input' || tag === 'select' || tag === 'textarea') ? '' : squash(el.innerText);
    elements.push({
      role: roleOf(el, tag, type),
      name: (shown || label).slice(0, 300),
      label: label.slice(0, 300),
      tag,
      type,
      autocomplete: String(el.getAttribute('autocomplete') || '').toLowerCase().slice(0, 100),
      field: squash(el.getAttribute('name') || el.id || '').slice(0, 100),
      submit,
      options: tag === 'select'
        ? Array.from(el.options).slice(0, 100).map((o) => squash(o.textContent).slice(0, 100)) : [],
    });
  }
  globalThis.__flarebotElements = kept;
  const body = document.body;
  return {
    title: String(document.title || '').slice(0, 300),
    url: String(location.href),
    text: String(body ? body.innerText : '').slice(0, %(text_max)d),
    elements,
  };
})()""" % {"elements_max": ELEMENTS_MAX, "text_max": TEXT_MAX + 2}  # noqa: UP031 (JavaScript braces)

# Scroll element N (1-based) into view and return its centre in viewport pixels, or null.
ELEMENT_CENTER = """((n) => {
  const el = (globalThis.__flarebotElements || [])[n - 1];
  if (!el || !el.isConnected) return null;
  el.scrollIntoView({block: 'center', inline: 'center'});
  const r = el.getBoundingClientRect();
  if (r.width <= 0 || r.height <= 0) return null;
  return [r.left + r.width / 2, r.top + r.height / 2];
})"""

# Focus element N and empty it, ready for typing; false when it is gone or not a text field.
ELEMENT_FOCUS_EMPTY = """((n) => {
  const el = (globalThis.__flarebotElements || [])[n - 1];
  if (!el || !el.isConnected) return false;
  el.scrollIntoView({block: 'center'});
  el.focus();
  if ('value' in el && typeof el.select === 'function') {
    el.select();
  } else if (el.isContentEditable) {
    const range = document.createRange();
    range.selectNodeContents(el);
    const selection = getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
  } else {
    return false;
  }
  return document.activeElement === el;
})"""

# Choose the option of select element N whose text (or value) is `option`; the chosen text or null.
ELEMENT_SELECT = """((n, option) => {
  const el = (globalThis.__flarebotElements || [])[n - 1];
  if (!el || !el.isConnected || el.tagName !== 'SELECT') return null;
  const want = String(option).replace(/\\s+/g, ' ').trim().toLowerCase();
  const found = Array.from(el.options).find((o) =>
    o.textContent.replace(/\\s+/g, ' ').trim().toLowerCase() === want || o.value.toLowerCase() === want);
  if (!found) return null;
  el.value = found.value;
  el.dispatchEvent(new Event('input', {bubbles: true}));
  el.dispatchEvent(new Event('change', {bubbles: true}));
  return found.textContent.replace(/\\s+/g, ' ').trim();
})"""

FORM_FIELDS_READ = 100  # a form's fields read for a held submit (the question lists fewer, and counts all)
CONTROLS_READ = 300  # the page's controls read after an action whose requests were held

# What the form of submit element N would send if it were clicked: its method, address and
# fields in the order the browser sends them (the clicked button among them, checkboxes only
# when checked, a select's chosen options, a file input's file names), each with its type,
# autocomplete and label so that `submission.py` can mask it; null when N submits no form.
# It reads properties only (no FormData, whose `formdata` event the page would see), through
# the prototypes' getters, since a control named "action" or "elements" shadows the form's own.
ELEMENT_FORM = """((n) => {
  const submitter = (globalThis.__flarebotElements || [])[n - 1];
  if (!submitter || !submitter.isConnected || !submitter.form) return null;
  const own = (proto, name, node) => Object.getOwnPropertyDescriptor(proto, name).get.call(node);
  const form = submitter.form;
  const squash = (t) => String(t || '').replace(/\\s+/g, ' ').trim();
  const method = submitter.hasAttribute('formmethod') ? submitter.formMethod
    : own(HTMLFormElement.prototype, 'method', form);
  const action = submitter.hasAttribute('formaction') ? submitter.formAction
    : own(HTMLFormElement.prototype, 'action', form);
  const fields = [];
  let total = 0;
  const add = (control, name, value) => {
    total += 1;
    if (fields.length >= %(read)d) return;
    const labels = control.labels ? Array.from(control.labels).map((l) => l.textContent).join(' ') : '';
    fields.push({
      name: String(name).slice(0, 200),
      value: String(value).slice(0, 1000),
      type: String(control.type || '').toLowerCase(),
      autocomplete: String(control.getAttribute('autocomplete') || '').toLowerCase().slice(0, 100),
      label: squash(control.getAttribute('aria-label') || labels).slice(0, 200),
    });
  };
  for (const control of own(HTMLFormElement.prototype, 'elements', form)) {
    const tag = control.tagName.toLowerCase();
    const name = control.getAttribute('name') || '';
    const type = String(control.type || '').toLowerCase();
    if (!name || control.matches(':disabled') || !['input', 'button', 'select', 'textarea'].includes(tag)) continue;
    if (tag === 'button' || ['submit', 'image', 'reset', 'button'].includes(type)) {
      if (control !== submitter || type === 'reset' || type === 'button') continue;
      if (type === 'image') { add(control, name + '.x', '0'); add(control, name + '.y', '0'); continue; }
      add(control, name, control.value);
    } else if (type === 'checkbox' || type === 'radio') {
      if (control.checked) add(control, name, control.value);
    } else if (tag === 'select') {
      for (const option of control.selectedOptions) add(control, name, option.value);
    } else if (type === 'file') {
      add(control, name, Array.from(control.files || []).map((f) => f.name).join(', '));
    } else {
      add(control, name, control.value);
    }
  }
  return {method: String(method || 'get').toLowerCase(), action: String(action || ''), fields, total};
})""" % {"read": FORM_FIELDS_READ}  # noqa: UP031 (JavaScript braces)

# The page's form controls (of its main document), for masking what a held request carries:
# name (or id), type, autocomplete, label and value. Values stay in the worker's memory.
PAGE_CONTROLS = """(() => {
  const squash = (t) => String(t || '').replace(/\\s+/g, ' ').trim();
  const found = [];
  for (const control of document.querySelectorAll('input, select, textarea')) {
    if (found.length >= %(read)d) break;
    const labels = control.labels ? Array.from(control.labels).map((l) => l.textContent).join(' ') : '';
    found.push({
      name: String(control.getAttribute('name') || control.id || '').slice(0, 200),
      type: String(control.type || '').toLowerCase(),
      autocomplete: String(control.getAttribute('autocomplete') || '').toLowerCase().slice(0, 100),
      label: squash(control.getAttribute('aria-label') || labels).slice(0, 200),
      value: String(control.value || '').slice(0, 1000),
    });
  }
  return found;
})()""" % {"read": CONTROLS_READ}  # noqa: UP031 (JavaScript braces)


@dataclass(frozen=True)
class Element:
    number: int
    role: str
    name: str
    tag: str
    type: str
    autocomplete: str
    field: str
    submit: bool
    options: tuple[str, ...] = ()
    label: str = ""  # the accessible name, when the visible text (`name`) says something else

    def as_dict(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "role": self.role,
            "name": self.name,
            "label": self.label,
            "tag": self.tag,
            "type": self.type,
            "autocomplete": self.autocomplete,
            "field": self.field,
            "submit": self.submit,
        }


@dataclass(frozen=True)
class Observation:
    title: str
    url: str
    text: str
    text_cut: bool
    elements: list[Element]

    def element(self, number: int) -> Element | None:
        return self.elements[number - 1] if 1 <= number <= len(self.elements) else None


def _clean(value: Any, limit: int) -> str:
    text = " ".join(str(value or "").split())
    text = "".join(ch for ch in text if ch.isprintable())
    return text[:limit]


def observation_from(raw: Any) -> Observation | None:
    """Build an Observation from what OBSERVE returned (None when it returned nothing usable)."""
    if not isinstance(raw, dict):
        return None
    elements = []
    for index, item in enumerate(raw.get("elements") or [], start=1):
        if not isinstance(item, dict):
            continue
        elements.append(
            Element(
                number=index,
                role=_clean(item.get("role"), 40) or "button",
                name=_clean(item.get("name"), NAME_MAX),
                tag=_clean(item.get("tag"), 20),
                type=_clean(item.get("type"), 30),
                autocomplete=_clean(item.get("autocomplete"), 100),
                field=_clean(item.get("field"), 100),
                submit=bool(item.get("submit")),
                label=_clean(item.get("label"), NAME_MAX),
                options=tuple(_clean(o, 100) for o in (item.get("options") or [])[:100]),
            )
        )
    text, cut = utf16_cut(_without_lone_surrogates(str(raw.get("text") or "")).strip(), TEXT_MAX)
    return Observation(
        title=_clean(_without_lone_surrogates(str(raw.get("title") or "")), 300),
        url=str(raw.get("url") or "")[:2048],
        text=text,
        text_cut=cut,
        elements=elements,
    )


def observation_text(observation: Observation) -> str:
    """The page as the model reads it: title, URL, visible text and `[N] role "name"` lines."""
    lines = [f"Title: {observation.title}", f"URL: {observation.url}", "", "Visible text:", observation.text]
    if observation.text_cut:
        lines.append(f"(cut at {TEXT_MAX:,} characters)")
    lines += ["", "Interactive elements:"]
    lines += [f'[{e.number}] {e.role} "{e.name}"' for e in observation.elements] or ["(none)"]
    return "\n".join(lines)


def _without_lone_surrogates(text: str) -> str:
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace").replace("\ufffd", "")
