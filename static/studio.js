// Memory Studio: a little plain JavaScript on pages the server renders.
//
// Reads come from the server as HTML: a region is refreshed by fetching the page again and
// swapping that region in. Changes go to the JSON API with the session's CSRF token. Markup
// says what to do, with data attributes:
//   form[data-api="METHOD /url"]    send the form as JSON; button[data-api] sends no body
//   data-refresh="#a #b"            regions to refresh after a success
//   data-done="text"                announced after a success; data-confirm asks first
//   form[data-confirm-text="name"]  sent only when its [data-confirmation] field says that
//   data-then="secret"              show the `key` of the answer once (API keys)
//   data-type="bool|number|lines|embedding-models|utc|clear"   how a field becomes JSON
//   data-empty="null|omit"          what an empty field sends
//   form[data-live]                 a GET form that refreshes data-target as you type
//   [data-poll="ms"]                a region that refreshes itself
"use strict";

(() => {
  const SEARCH_DEBOUNCE_MS = 300;
  const HEALTH_EVERY_MS = 30000;

  const csrfToken = () => document.querySelector('meta[name="csrf-token"]').content;
  const loginUrl = () =>
    "/dashboard/login?next=" + encodeURIComponent(location.pathname + location.search);

  // -- announcements --------------------------------------------------------------------

  let announceTimer;
  function announce(message, isError = false) {
    const box = document.getElementById("announcer");
    if (!box) return;
    box.textContent = "";
    box.classList.toggle("is-error", isError);
    window.setTimeout(() => { box.textContent = message; }, 30); // read again if repeated
    window.clearTimeout(announceTimer);
    announceTimer = window.setTimeout(() => { box.textContent = ""; }, 6000);
  }

  // -- the JSON API ---------------------------------------------------------------------

  async function api(method, url, body) {
    const headers = { "Accept": "application/json", "X-CSRF-Token": csrfToken() };
    const init = { method, headers, credentials: "same-origin" };
    if (body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const response = await fetch(url, init);
    if (response.status === 401) {
      location.assign(loginUrl());
      throw new Error("Your session has ended: log in again.");
    }
    let data = null;
    try { data = await response.json(); } catch { /* an empty or non-JSON answer */ }
    if (!response.ok) {
      const error = new Error(data?.error?.message || `${response.status} ${response.statusText}`);
      error.details = data?.error?.details || [];
      throw error;
    }
    return data;
  }

  // -- regions: refreshed from the server's own rendering --------------------------------

  const inFlight = new Map();

  async function refresh(selectors, url = location.href) {
    const ids = selectors.split(/\s+/).filter(Boolean);
    const key = ids.join(" ");
    inFlight.get(key)?.abort(); // a newer refresh wins over an older one
    const controller = new AbortController();
    inFlight.set(key, controller);
    ids.forEach((id) => document.querySelector(id)?.setAttribute("aria-busy", "true"));
    try {
      const response = await fetch(url, {
        headers: { "Accept": "text/html" }, credentials: "same-origin", signal: controller.signal,
      });
      if (new URL(response.url).pathname.endsWith("/dashboard/login")) {
        location.assign(loginUrl());
        return;
      }
      if (!response.ok) throw new Error(`The page could not be refreshed (${response.status}).`);
      const page = new DOMParser().parseFromString(await response.text(), "text/html");
      for (const id of ids) {
        const fresh = page.querySelector(id);
        const stale = document.querySelector(id);
        if (!fresh || !stale) continue;
        const hadFocus = stale.contains(document.activeElement);
        const focusedId = hadFocus ? document.activeElement.id : "";
        stale.replaceWith(document.adoptNode(fresh));
        if (hadFocus) {
          const same = focusedId && document.getElementById(focusedId);
          if (same) same.focus(); else focusRegion(fresh);
        }
      }
    } catch (error) {
      if (error.name !== "AbortError") announce(error.message, true);
    } finally {
      if (inFlight.get(key) === controller) inFlight.delete(key);
      ids.forEach((id) => document.querySelector(id)?.removeAttribute("aria-busy"));
    }
  }

  function focusRegion(region) {
    region.setAttribute("tabindex", "-1");
    region.focus();
  }

  function announceRegion(selector) {
    const note = document.querySelector(selector)?.querySelector("[data-announce]");
    if (note) announce(note.dataset.announce);
  }

  // -- forms as JSON --------------------------------------------------------------------

  function formBody(form) {
    const body = {};
    for (const field of form.elements) {
      if (!field.name || field.disabled || field.name === "csrf_token") continue;
      if (["submit", "button", "file"].includes(field.type)) continue;
      const kind = field.dataset.type;
      if (kind === "clear") {
        if (field.checked) body[field.name] = null;
        continue;
      }
      if (field.type === "checkbox" && kind === "list") { // checkboxes of one name: the checked values
        body[field.name] = body[field.name] || [];
        if (field.checked) body[field.name].push(field.value);
        continue;
      }
      if (field.type === "checkbox") {
        body[field.name] = field.checked;
        continue;
      }
      const raw = field.value;
      if (raw.trim() === "" && (field.dataset.empty || kind === "number")) {
        if (field.dataset.empty === "null") body[field.name] = null;
        continue;
      }
      body[field.name] = asJson(kind, raw);
    }
    return body;
  }

  function asJson(kind, raw) {
    const lines = () => raw.split("\n").map((line) => line.trim()).filter(Boolean);
    switch (kind) {
      case "number": return Number(raw);
      case "lines": return lines();
      case "embedding-models":
        return lines().map((line) => {
          const [id, dimensions] = line.split(/\s+/);
          return { id, dimensions: Number(dimensions) };
        });
      case "utc": return raw.length === 16 ? `${raw}:00Z` : `${raw}Z`; // datetime-local, in UTC
      default: return raw;
    }
  }

  function clearErrors(form) {
    form.querySelectorAll("[aria-invalid]").forEach((field) => field.removeAttribute("aria-invalid"));
    const alert = form.querySelector(".form-alert");
    if (alert) alert.hidden = true;
  }

  function showErrors(form, error) {
    clearErrors(form);
    let first = null;
    for (const detail of error.details || []) {
      const named = form.elements.namedItem(detail.field.split(".")[0]);
      const field = named instanceof RadioNodeList ? named[0] : named;
      if (field) {
        field.setAttribute("aria-invalid", "true");
        first = first || field;
      }
    }
    const alert = form.querySelector(".form-alert");
    if (!alert) {
      announce(error.message, true);
      return;
    }
    alert.textContent = error.message;
    alert.hidden = false;
    if (first) {
      first.focus();
    } else {
      alert.setAttribute("tabindex", "-1");
      alert.focus();
    }
  }

  async function withBusy(element, work) {
    const buttons = element.matches("button") ? [element] : [...element.querySelectorAll("button")];
    buttons.forEach((button) => { button.disabled = true; });
    try {
      return await work();
    } finally {
      buttons.forEach((button) => { button.disabled = false; });
    }
  }

  async function afterSuccess(element, data) {
    if (element.dataset.then === "secret") showSecret(data.key);
    const dialog = element.closest("dialog");
    if (dialog) dialog.close();
    if (element.matches("form") && (dialog || element.hasAttribute("data-reset"))) element.reset();
    if (element.dataset.refresh) await refresh(element.dataset.refresh);
    if (element.dataset.done) announce(element.dataset.done);
  }

  async function sendForm(form) {
    const [method, url] = form.dataset.api.split(" ");
    const typed = form.querySelector("[data-confirmation]");
    if (form.dataset.confirmText !== undefined && typed?.value !== form.dataset.confirmText) {
      showErrors(form, { message: `Type “${form.dataset.confirmText}” exactly to confirm.`, details: [] });
      typed?.setAttribute("aria-invalid", "true");
      typed?.focus();
      return;
    }
    await withBusy(form, async () => {
      try {
        const data = await api(method, url, formBody(form));
        clearErrors(form);
        await afterSuccess(form, data);
      } catch (error) {
        showErrors(form, error);
      }
    });
  }

  async function sendButton(button) {
    if (button.dataset.confirm && !window.confirm(button.dataset.confirm)) return;
    const [method, url] = button.dataset.api.split(" ");
    await withBusy(button, async () => {
      try {
        await afterSuccess(button, await api(method, url));
      } catch (error) {
        announce(error.message, true);
      }
    });
  }

  // -- pieces of particular pages -------------------------------------------------------

  function showSecret(secret) {
    const box = document.getElementById("new-key");
    const input = document.getElementById("new-key-secret");
    input.value = secret;
    box.hidden = false;
    input.focus();
    input.select();
  }

  async function copy(button) {
    const input = document.querySelector(button.dataset.copy);
    try {
      await navigator.clipboard.writeText(input.value);
      announce("Copied to the clipboard");
    } catch {
      input.focus();
      input.select();
      announce("Copying was refused: the text is selected, press Ctrl+C", true);
    }
  }

  function toggle(control) {
    const target = document.querySelector(control.dataset.toggle);
    if (!target) return;
    const opening = target.hidden;
    target.hidden = !opening;
    document.querySelectorAll(`[aria-controls="${target.id}"]`)
      .forEach((opener) => opener.setAttribute("aria-expanded", String(opening)));
    if (opening) {
      target.querySelector("input, textarea, select")?.focus();
    } else {
      target.querySelectorAll("form").forEach((form) => { form.reset(); clearErrors(form); });
      if (target.contains(document.activeElement) || target.contains(control)) {
        document.querySelector(`[aria-controls="${target.id}"]`)?.focus();
      }
    }
  }

  function liveUpdate(form, submitter = null) {
    // The button that submitted the form says what to do (its name and value), as in a GET.
    const params = new URLSearchParams(new FormData(form, submitter));
    for (const [name, value] of [...params]) if (value === "") params.delete(name);
    const url = `${form.action.split("?")[0]}?${params}`;
    history.replaceState(null, "", url);
    return refresh(form.dataset.target, url).then(() => announceRegion(form.dataset.target));
  }

  async function importFile(form) {
    const file = form.elements.file.files[0];
    let memories;
    try {
      const parsed = JSON.parse(await file.text());
      memories = Array.isArray(parsed) ? parsed : parsed?.memories;
      if (!Array.isArray(memories)) {
        throw new Error('The file holds no list of memories: expected a list, or an object with "memories".');
      }
    } catch (error) {
      const message = error instanceof SyntaxError ? `The file is not JSON: ${error.message}` : error.message;
      showErrors(form, { message, details: [] });
      return;
    }
    const apiKeyId = form.elements.apiKeyId.value || undefined;
    const batches = importBatches(memories, Number(form.dataset.maxBytes));
    const summary = { created: 0, updated: 0, failed: 0, results: [] };
    const out = document.getElementById("import-result");
    await withBusy(form, async () => {
      try {
        for (const batch of batches) {
          out.textContent = `Importing ${file.name}: ${summary.results.length} of ${memories.length} done…`;
          const sendable = batch.filter((entry) => !entry.tooBig);
          const answer = sendable.length
            ? await api("POST", form.dataset.import, { memories: sendable.map((e) => e.item), apiKeyId })
            : { results: [] };
          answer.results.forEach((result) => { result.index = sendable[result.index].index; });
          const refused = batch.filter((entry) => entry.tooBig).map((entry) => ({
            index: entry.index, key: entry.item?.key, status: "failed",
            errors: [{ field: "body", message: "Larger than the server accepts in one request (MAX_BODY_BYTES)." }],
          }));
          for (const result of [...answer.results, ...refused].sort((a, b) => a.index - b.index)) {
            summary[result.status] += 1;
            summary.results.push(result);
          }
        }
        clearErrors(form);
        form.reset();
      } catch (error) {
        error.message = `Import stopped after ${summary.results.length} of ${memories.length} memories: ${error.message}`;
        showErrors(form, error);
      }
      showImport(summary, file.name);
      await refresh(form.dataset.refresh);
      announce(`Import: ${summary.created} created, ${summary.updated} updated, ${summary.failed} failed`);
    });
  }

  // Split an import into requests the server accepts: under its body limit, 1,000 at most.
  function importBatches(memories, maxBytes) {
    const budget = Math.floor(maxBytes * 0.9) - 200; // room for the envelope
    const batches = [];
    let batch = [];
    let bytes = 0;
    memories.forEach((item, index) => {
      const size = new Blob([JSON.stringify(item)]).size + 1;
      if (batch.length && (bytes + size > budget || batch.length >= 1000)) {
        batches.push(batch);
        batch = [];
        bytes = 0;
      }
      batch.push({ item, index, tooBig: size > budget });
      bytes += size;
    });
    if (batch.length) batches.push(batch);
    return batches;
  }

  function showImport(summary, fileName) {
    const out = document.getElementById("import-result");
    const line = (result) => {
      const item = document.createElement("li");
      item.className = result.status;
      let text = `#${result.index + 1} ${result.key ?? "(no key)"}: ${result.status}`;
      if (result.errors?.length) text += ` (${result.errors.map((e) => `${e.field}: ${e.message}`).join("; ")})`;
      if (result.warnings?.length) text += ` [${result.warnings.join("; ")}]`;
      item.textContent = text;
      return item;
    };
    const heading = document.createElement("p");
    heading.textContent = `${fileName}: ${summary.created} created, ${summary.updated} updated, ${summary.failed} failed.`;
    const notable = summary.results.filter((r) => r.status === "failed" || r.warnings?.length);
    const problems = document.createElement("ul");
    problems.append(...notable.map(line));
    const all = document.createElement("details");
    const label = document.createElement("summary");
    label.textContent = `Every item (${summary.results.length})`;
    const list = document.createElement("ul");
    list.append(...summary.results.map(line));
    all.append(label, list);
    out.replaceChildren(heading, ...(notable.length ? [problems] : []), all);
  }

  function watchHealth() {
    const dot = document.getElementById("health");
    if (!dot) return;
    const check = async () => {
      let ok = false;
      let text;
      try {
        const response = await fetch(dot.dataset.healthUrl, { headers: { "Accept": "application/json" } });
        const data = await response.json();
        ok = response.ok && data.working === true;
        text = ok ? `Pipeline healthy (${data.latencyMs} ms)` : `Pipeline failing: ${data.error?.message || response.status}`;
      } catch {
        text = "Pipeline health unknown: the server did not answer";
      }
      dot.classList.toggle("is-ok", ok);
      dot.classList.toggle("is-bad", !ok);
      dot.querySelector(".health-text").textContent = text;
    };
    check();
    window.setInterval(check, HEALTH_EVERY_MS);
  }

  function poll(id) {
    const region = document.getElementById(id);
    if (!region) return;
    window.setTimeout(async () => {
      if (!document.hidden) await refresh(`#${id}`);
      poll(id); // the fresh region says how soon to come back (faster while busy)
    }, Number(region.dataset.poll));
  }

  // -- wiring ---------------------------------------------------------------------------

  document.addEventListener("submit", (event) => {
    const form = event.target;
    if (form.matches("form[data-api]")) {
      event.preventDefault();
      sendForm(form);
    } else if (form.matches("form[data-import]")) {
      event.preventDefault();
      importFile(form);
    } else if (form.matches("form[data-live]")) {
      event.preventDefault();
      liveUpdate(form, event.submitter);
    }
  });

  document.addEventListener("click", (event) => {
    const target = event.target;
    const apiButton = target.closest("button[data-api]");
    if (apiButton) return sendButton(apiButton);
    const toggler = target.closest("[data-toggle]");
    if (toggler) return toggle(toggler);
    const opener = target.closest("[data-open-dialog]");
    if (opener) return document.querySelector(opener.dataset.openDialog)?.showModal();
    const closer = target.closest("[data-close-dialog]");
    if (closer) return closer.closest("dialog")?.close();
    const copier = target.closest("[data-copy]");
    if (copier) return copy(copier);
    const pageLink = target.closest("a[data-nav]");
    if (pageLink) {
      event.preventDefault();
      history.pushState(null, "", pageLink.href);
      const region = `#${pageLink.closest(".region").id}`;
      return refresh(region).then(() => announceRegion(region));
    }
    return undefined;
  });

  document.addEventListener("input", (event) => {
    const form = event.target.form;
    if (!form?.matches("form[data-live]") || form.dataset.live === "submit") return;
    window.clearTimeout(form.liveTimer);
    const typed = ["search", "text"].includes(event.target.type);
    form.liveTimer = window.setTimeout(() => liveUpdate(form), typed ? SEARCH_DEBOUNCE_MS : 0);
  });

  document.addEventListener("change", (event) => {
    if (event.target.matches("[data-autosubmit]")) event.target.form.requestSubmit();
  });

  document.addEventListener("keydown", (event) => {
    if (event.key !== "Escape") return;
    const open = event.target.closest("[data-collapsible]:not([hidden])");
    const cancel = open && document.querySelector(`[aria-controls="${open.id}"]`);
    if (cancel) toggle(cancel);
  });

  window.addEventListener("popstate", () => location.reload());
  document.addEventListener("close", (event) => {
    event.target.querySelectorAll?.("form").forEach((form) => clearErrors(form));
  }, true);

  watchHealth();
  document.querySelectorAll("[data-poll]").forEach((region) => poll(region.id));
})();
