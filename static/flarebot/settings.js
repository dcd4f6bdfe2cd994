// The settings page: model and provider keys, the agent's instructions, its memory and its tasks.
// Everything is loaded from and saved through /api/settings/ and /api/memories/ (see
// PROTOCOL.md); the page itself carries no private data. Stored keys are never shown: only
// "Configured"/"Missing". The Memory, Tasks, Notifications and System sections are modules of their own (memory.js, tasks.js, notifications.js, system.js).
import { accountSection } from "./account.js";
import { call as api, say } from "./api.js";
import { localTime, showCount } from "./dom.js";
import { memorySection } from "./memory.js";
import { notificationsSection } from "./notifications.js";
import { systemSection } from "./system.js";
import { tasksSection } from "./tasks.js";

(function () {
  // Limits come from the server (the template), never repeated here.
  const LIMIT = Number(document.getElementById("instructions-counter").dataset.limit);
  const LABELS = { anthropic: "Anthropic", openai: "OpenAI", local: "Local" };
  const NEEDS_KEY = { anthropic: true, openai: true };
  const byId = (id) => document.getElementById(id);


  function busy(elements, on) {
    for (const element of elements) element.disabled = on;
  }

  // ---- Model and keys -------------------------------------------------------------

  const modelForm = byId("model-form");
  const providerSelect = byId("provider");
  const modelSelect = byId("model-select");
  const modelSave = byId("model-save");
  const modelMessage = byId("model-message");
  const keyHint = byId("model-key-hint");
  const keyForms = Array.from(document.querySelectorAll(".key-form"));
  let catalog = {};
  let credentials = {};
  let verification = {};
  let uncheckedReasons = {};

  function fillModels(provider, selected) {
    modelSelect.replaceChildren();
    for (const model of catalog[provider] || []) {
      modelSelect.append(new Option(model, model, false, model === selected));
    }
  }

  function showKeyHint() {
    const provider = providerSelect.value;
    const missing = NEEDS_KEY[provider] && credentials[provider] !== "configured";
    keyHint.hidden = !missing;
    keyHint.textContent = missing ? `Add an ${LABELS[provider]} API key below to use this model.` : "";
  }

  function showSettings(settings) {
    credentials = settings.credentials;
    verification = settings.verification || {};
    uncheckedReasons = settings.unchecked_reasons || {};
    const { provider, model } = settings.configuration;
    providerSelect.replaceChildren();
    for (const [name, models] of Object.entries(catalog)) {
      if (models.length) providerSelect.append(new Option(LABELS[name] || name, name, false, name === provider));
    }
    if (!catalog[provider] || !catalog[provider].length) {
      // The stored choice is no longer offered (an operator removed a local model).
      providerSelect.selectedIndex = 0;
    }
    fillModels(providerSelect.value, model);
    for (const form of keyForms) showKey(form);
    showKeyHint();
    if (settings.configuration.available === false) {
      // Never silently another model: turns fail until the owner chooses one that is offered.
      say(modelMessage, `The model ${model} is no longer offered. Choose another and save.`, "error");
    }
  }

  function showKey(form) {
    const provider = form.dataset.provider;
    let state = credentials[provider] === "configured" ? "configured" : "missing";
    // A key saved while its provider could not be asked is stored, but not known to work.
    if (state === "configured" && verification[provider] === "not_verified") state = "not-verified";
    // Stored, but it no longer opens (the server secret changed): the owner enters it again.
    if (state === "configured" && verification[provider] === "unreadable") state = "unreadable";
    const badge = form.querySelector("[data-role=state]");
    badge.dataset.state = state;
    badge.textContent = {
      configured: "Verified",
      "not-verified": "Saved, not checked",
      unreadable: "Unreadable",
      missing: "Missing",
    }[state];
    form.querySelector("[data-role=remove]").hidden = state === "missing";
    const message = form.querySelector("[data-role=message]");
    if (state === "unreadable") {
      say(message, `The stored ${form.dataset.label} key can no longer be read (the server secret or the installation changed); enter it again.`, "error");
    } else if (message.dataset.unreadable) {
      say(message, "");
    }
    message.dataset.unreadable = state === "unreadable" ? "1" : "";
  }

  providerSelect.addEventListener("change", () => {
    fillModels(providerSelect.value, null);
    say(modelMessage, "");
    showKeyHint();
  });
  modelSelect.addEventListener("change", () => say(modelMessage, ""));

  modelForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    const controls = [providerSelect, modelSelect, modelSave];
    busy(controls, true);
    say(modelMessage, "Saving…");
    try {
      const body = { provider: providerSelect.value, model: modelSelect.value };
      showSettings(await api("PUT", "/api/settings/model/", body));
      say(modelMessage, "Saved.", "ok");
    } catch (error) {
      say(modelMessage, error.message, "error");
    } finally {
      busy(controls, false);
    }
  });

  for (const form of keyForms) {
    const provider = form.dataset.provider;
    const path = `/api/settings/provider-keys/${provider}/`;
    const input = form.querySelector("input");
    const save = form.querySelector("[data-role=save]");
    const remove = form.querySelector("[data-role=remove]");
    const message = form.querySelector("[data-role=message]");
    const controls = [input, save, remove];

    const run = async (method, body, done) => {
      busy(controls, true);
      say(message, method === "PUT" ? "Saving…" : "Removing…");
      input.removeAttribute("aria-invalid");
      try {
        showSettings(await api(method, path, body));
        if (method === "PUT") input.value = "";
        if (method === "PUT" && verification[provider] !== "verified") {
          // Green only for a key the provider accepted: one it could not be asked about is just saved.
          say(message, `Saved; not checked: ${uncheckedReasons[provider] || "the provider could not be asked."}`);
        } else {
          say(message, done, "ok");
        }
      } catch (error) {
        if (method === "PUT") input.setAttribute("aria-invalid", "true");
        say(message, error.message, "error");
      } finally {
        busy(controls, false);
      }
    };

    form.addEventListener("submit", (event) => {
      event.preventDefault();
      run("PUT", { key: input.value }, `Key saved: ${form.dataset.label} accepted it.`);
    });
    remove.addEventListener("click", () => {
      if (window.confirm(`Remove the stored ${form.dataset.label} key?`)) run("DELETE", undefined, "Key removed.");
    });
  }

  // ---- Instructions --------------------------------------------------------------

  const instructionsForm = byId("instructions-form");
  const textarea = byId("instructions-text");
  const counter = byId("instructions-counter");
  const stateBadge = byId("instructions-state");
  const modified = byId("instructions-modified");
  const instructionsMessage = byId("instructions-message");
  const instructionsSave = byId("instructions-save");
  const instructionsReset = byId("instructions-reset");
  const instructionControls = [textarea, instructionsSave, instructionsReset];
  let saved = null; // the text the server holds; null until loaded

  const count = () => showCount(counter, textarea.value, LIMIT);

  function showInstructions(view, { replaceDraft }) {
    saved = view.effective;
    if (replaceDraft) textarea.value = view.effective;
    stateBadge.dataset.state = view.customized ? "customized" : "default";
    stateBadge.textContent = view.customized ? "Customized" : "Default";
    if (view.customized && view.modified_at) {
      modified.replaceChildren("Modified ", localTime(view.modified_at));
    } else {
      modified.textContent = "Shipped defaults";
    }
    count();
  }

  textarea.addEventListener("input", () => {
    count();
    if (instructionsMessage.dataset.kind === "ok") say(instructionsMessage, "");
  });

  instructionsForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    const text = textarea.value;
    busy(instructionControls, true);
    textarea.removeAttribute("aria-invalid");
    say(instructionsMessage, "Saving…");
    try {
      const view = await api("PUT", "/api/settings/instructions/", { text });
      showInstructions(view, { replaceDraft: textarea.value === text });
      say(instructionsMessage, "Saved.", "ok");
    } catch (error) {
      textarea.setAttribute("aria-invalid", "true");
      say(instructionsMessage, error.message, "error");
    } finally {
      busy(instructionControls, false);
    }
  });

  instructionsReset.addEventListener("click", async () => {
    if (!window.confirm("Reset the instructions to the shipped defaults? Your own text will be discarded.")) return;
    busy(instructionControls, true);
    say(instructionsMessage, "Resetting…");
    try {
      showInstructions(await api("DELETE", "/api/settings/instructions/"), { replaceDraft: true });
      textarea.removeAttribute("aria-invalid");
      say(instructionsMessage, "Back to the shipped defaults.", "ok");
    } catch (error) {
      say(instructionsMessage, error.message, "error");
    } finally {
      busy(instructionControls, false);
    }
  });

  window.addEventListener("beforeunload", (event) => {
    if (saved !== null && textarea.value !== saved) {
      event.preventDefault();
      event.returnValue = "";
    }
  });

  // ---- Loading -------------------------------------------------------------------

  const memory = memorySection();
  const system = systemSection();
  const tasks = tasksSection();
  const notifications = notificationsSection();

  const pageStatus = byId("page-status");
  const retry = byId("page-retry");
  let loads = 0; // a late answer of an older load never overwrites a newer one

  async function load() {
    const mine = ++loads;
    retry.hidden = true;
    pageStatus.hidden = false;
    say(pageStatus, "Loading…");
    const [catalogView, settings, instructions, facts, taskList] = await Promise.allSettled([
      api("GET", "/api/settings/model/catalog/"),
      api("GET", "/api/settings/model/"),
      api("GET", "/api/settings/instructions/"),
      memory.load(),
      system.load(),
      tasks.load(),
      notifications.load(),
    ]);
    if (mine !== loads) return;
    const failures = [catalogView, settings, instructions, facts, taskList].filter((r) => r.status === "rejected");
    if (catalogView.status === "fulfilled" && settings.status === "fulfilled") {
      catalog = catalogView.value.providers;
      showSettings(settings.value);
      busy([providerSelect, modelSelect, modelSave], false);
      for (const form of keyForms) busy(form.querySelectorAll("input, button"), false);
    }
    if (instructions.status === "fulfilled") {
      // A retry keeps what the owner typed meanwhile.
      showInstructions(instructions.value, { replaceDraft: saved === null || textarea.value === saved });
      busy(instructionControls, false);
    }
    if (failures.length) {
      say(pageStatus, `Some settings could not be loaded: ${failures[0].reason.message}`, "error");
      retry.hidden = false;
    } else {
      pageStatus.hidden = true;
      say(pageStatus, "");
    }
    document.body.dataset.ready = "1";
  }

  retry.addEventListener("click", () => load());
  accountSection();
  load();
})();
