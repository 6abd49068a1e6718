// flows ui: actions with the bearer token, and the run page kept live from the event stream.
// Every value from the server is put into the page as text (textContent), never as markup,
// except the step panel, which the server renders with every value escaped.
"use strict";

const TOKEN_KEY = "flows-ui-token";

function flash(text, ok) {
  const box = document.getElementById("flash");
  box.textContent = text;
  box.className = ok ? "ok" : "error";
}

// An API refusal's `detail` as one readable line, whatever its shape: the API's words (a
// string), a list of a flow file's findings (file:line:col: message) or of a request's
// validation errors (where: what), or an object (its message, then what it holds). The caller
// puts it into the page as text.
function detailText(detail) {
  if (detail === null || detail === undefined) return "";
  if (typeof detail !== "object") return String(detail);
  if (Array.isArray(detail)) return detail.map(detailText).filter(Boolean).join("; ");
  if (typeof detail.message === "string" && "line" in detail && "file" in detail) {
    const hint = detail.hint ? ` (hint: ${detail.hint})` : "";
    return `${detail.file}:${detail.line}:${detail.col}: ${detail.message}${hint}`;
  }
  if (typeof detail.msg === "string") {
    const where = Array.isArray(detail.loc) ? detail.loc.join(".") : "";
    return where ? `${where}: ${detail.msg}` : detail.msg;
  }
  const { message, ...rest } = detail;
  const parts = Object.entries(rest).map(([key, value]) => {
    const text = detailText(value);
    return text ? `${key}: ${text}` : "";
  }).filter(Boolean);
  const head = message === undefined ? "" : detailText(message);
  return [head, parts.join("; ")].filter(Boolean).join(": ");
}

async function post(url, body) {
  const token = sessionStorage.getItem(TOKEN_KEY) || "";
  const headers = { "Content-Type": "application/json" };
  if (token) headers.Authorization = "Bearer " + token;
  const reply = await fetch(url, {
    method: "POST", headers, body: JSON.stringify(body || {}), credentials: "omit",
  });
  let data = {};
  try { data = await reply.json(); } catch (e) { data = {}; }
  return { ok: reply.ok, status: reply.status, data };
}

async function act(label, url, body, reload) {
  const reply = await post(url, body);
  if (!reply.ok) {
    flash(`Could not ${label}: ${detailText(reply.data.detail) || reply.status}`, false);
    return reply;
  }
  flash(`Done: ${label}${counted(reply.data)}.`, true);
  if (reload) setTimeout(() => location.reload(), 300);
  return reply;
}

// What an action's reply counts, as the command line says it: the jobs a run's cancel canceled
// (its child runs' included: the engine's one count), a backfill's canceled runs and jobs, the
// jobs a retry put back, the jobs a re-run put back to run again.
function counted(data) {
  const jobs = (n) => `${n} job${n === 1 ? "" : "s"}`;
  if (typeof data.canceled === "number") return `: ${jobs(data.canceled)} canceled`;
  if (typeof data.runs === "number" && typeof data.jobs === "number") {
    return `: ${data.runs} active run${data.runs === 1 ? "" : "s"} canceled (${jobs(data.jobs)})`;
  }
  if (typeof data.retried === "number") return `: ${jobs(data.retried)} put back`;
  if (typeof data.kicked === "number") return `: ${jobs(data.kicked)} put back`;
  if (typeof data.rerun === "number") return `: ${jobs(data.rerun)} put back to run again`;
  return "";
}

function setupToken() {
  const input = document.getElementById("token");
  input.value = sessionStorage.getItem(TOKEN_KEY) || "";
  input.addEventListener("input", () => sessionStorage.setItem(TOKEN_KEY, input.value.trim()));
  document.getElementById("token-form").addEventListener("submit", (e) => e.preventDefault());
}

// The one place that decides which buttons ask first: every action that changes a run or a job
// (a run's retry and cancel, a step's or an item's retry, re-run, kick, approve: its URL is under
// /api/v1/runs/ or /api/v1/jobs/), with the question its page wrote (`data-confirm`, naming
// what it changes) or else its label's; any other action that carries a question (a backfill's
// cancel). null: it goes at once.
function question(button) {
  if (button.dataset.confirm) return button.dataset.confirm;
  if (!/^\/api\/v1\/(runs|jobs)\//.test(button.dataset.action)) return null;
  const label = button.dataset.label || "do this";
  return label.charAt(0).toUpperCase() + label.slice(1) + "?";
}

function setupActions() {
  document.addEventListener("click", (e) => {
    const button = e.target.closest("button[data-action]");
    if (!button) return;
    const asked = question(button);
    if (asked !== null && !confirm(asked)) return;
    // a body the server wrote as JSON (`data-body`: which item of a step), else none
    const body = button.dataset.body ? JSON.parse(button.dataset.body) : {};
    act(button.dataset.label, button.dataset.action, body, button.dataset.reload);
  });
  for (const form of document.querySelectorAll("form.trigger")) {
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      let params;
      try { params = formParams(form); } catch (error) { flash(error.message, false); return; }
      const reply = await act(`trigger ${form.dataset.flow}`, "/api/v1/runs",
        { flow: form.dataset.flow, params }, false);
      if (reply.ok) {
        const link = document.createElement("a");
        link.href = "/runs/" + encodeURIComponent(reply.data.id);
        link.textContent = reply.data.id;
        document.getElementById("flash").append(" Run ", link);
      }
    });
  }
  for (const form of document.querySelectorAll("form.start")) {
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      let params;
      try { params = formParams(form); } catch (error) { flash(error.message, false); return; }
      const reply = await act(`run ${form.dataset.flow}`,
        "/api/v1/flows/" + encodeURIComponent(form.dataset.flow) + "/runs", { params }, false);
      if (reply.ok) {
        const link = document.createElement("a");
        link.href = "/runs/" + encodeURIComponent(reply.data.id);
        link.textContent = reply.data.id;
        document.getElementById("flash").append(" Run ", link);
      }
    });
  }
  for (const form of document.querySelectorAll("form.unfail")) {
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      const queue = form.elements.queue.value.trim();
      act(`unfail ${form.dataset.group}`,
        "/api/v1/failures/" + encodeURIComponent(form.dataset.group) + "/unfail",
        { queue, count: 1000 }, true);
    });
  }
}

// A trigger form's fields as typed params; an empty optional field is left to its default.
function formParams(form) {
  const params = {};
  for (const field of form.querySelectorAll("[data-type]")) {
    const type = field.dataset.type;
    if (type === "bool") { params[field.name] = field.checked; continue; }
    const text = field.value.trim();
    if (text === "") continue;
    if (type === "int" || type === "number") {
      const value = Number(text);
      if (Number.isNaN(value)) throw new Error(`${field.name}: '${text}' is not a number`);
      params[field.name] = value;
    } else if (type === "json") {
      try { params[field.name] = JSON.parse(text); } catch (error) {
        throw new Error(`${field.name}: not valid JSON (${error.message})`);
      }
    } else {
      params[field.name] = text;
    }
  }
  return params;
}

// -- the run page --------------------------------------------------------------------------------


function setStatusClass(element, status) {
  for (const name of [...element.classList]) if (name.startsWith("st-")) element.classList.remove(name);
  element.classList.add("st-" + status);
}

function setupRun(section) {
  const runId = section.dataset.run;
  const base = "/runs/" + encodeURIComponent(runId);
  let chosen = null, panelOffset = 0, pending = null, every = 3000;
  const seen = {};
  // each status word's symbol, from the server's one table (flows.runs.statuses), and the mark
  // of a missed deadline
  const SYMBOLS = JSON.parse(section.dataset.symbols || "{}");
  const MARK = section.dataset.deadlineMark;
  const SVG = "http://www.w3.org/2000/svg";

  // What templates/run.html draws, from the values of /live (the ones the page was drawn from):
  // the text and the words are the server's, so a redraw shows what a reload would.
  function badgeOf(className, symbol, text) {
    const span = document.createElement("span");
    span.className = className;
    const sym = document.createElement("span");
    sym.className = "sym";
    sym.setAttribute("aria-hidden", "true");
    sym.textContent = symbol;
    span.append(sym, " " + text);
    return span;
  }

  function badge(status) { return badgeOf("badge st-" + status, SYMBOLS[status] || "•", status); }

  function deadlineBadge(live) {
    if (live.deadline_missed == null) return [];
    const span = badgeOf("badge st-expired", MARK, "deadline missed");
    span.id = "deadline-missed";
    span.title = live.deadline_title;
    return [" ", span];
  }

  function tspan(className, text) {
    const part = document.createElementNS(SVG, "tspan");
    part.setAttribute("class", className);
    part.textContent = text;
    return part;
  }

  // A graph node's second line: symbol, status, a foreach step's progress, a missed deadline.
  function nodeState(step) {
    const parts = [tspan("sym", SYMBOLS[step.status] || "•"), " ", tspan("label", step.status)];
    if (step.items !== 1) parts.push(" ", tspan("progress", step.progress));
    if (step.deadline_missed != null) parts.push(" ", tspan("sym missed", MARK));
    return parts;
  }

  async function refresh() {
    const started = performance.now();
    const reply = await fetch(base + "/live", { credentials: "omit" }).catch(() => null);
    // a big run costs the server more to read: redraw it less often
    every = Math.max(3000, 5 * (performance.now() - started));
    pending = null;
    if (!reply || !reply.ok) return;
    const live = await reply.json();
    section.dataset.status = live.status;
    document.getElementById("run-status").replaceChildren(badge(live.status));
    document.getElementById("run-deadline").replaceChildren(...deadlineBadge(live));
    // the run's buttons are those the engine allows now
    for (const button of document.querySelectorAll("#run-actions [data-run-action]")) {
      button.hidden = !live.actions.includes(button.dataset.runAction);
    }
    let chosenChanged = false;
    for (const node of section.querySelectorAll("g.node")) {
      const step = live.steps[node.dataset.step];
      if (!step) continue;
      setStatusClass(node, step.status);
      node.querySelector("text.state").replaceChildren(...nodeState(step));
      node.setAttribute("aria-label", step.label);
      // the chosen step's panel is drawn again when what it shows changed: its actions too,
      // and its items', which change with the run's status (a step or an item re-runs only
      // once its run is not running) even where the step's own words stay the same
      const key = [live.status, step.status, step.progress, step.deadline_missed, step.actions]
        .join(" ");
      if (seen[node.dataset.step] !== key && node.dataset.step === chosen) chosenChanged = true;
      seen[node.dataset.step] = key;
    }
    if (chosenChanged) openStep(chosen, panelOffset, false);
  }

  function soon() { if (!pending) pending = setTimeout(refresh, 250); }

  // Opens a step's panel, and with `follow` its job's log (`options`: which job, attempt and
  // line, from a link). "flows:step-opened" tells static/runlinks.js, which keeps the URL.
  async function openStep(step, offset, follow, options = {}) {
    chosen = step; panelOffset = offset;
    const reply = await fetch(`${base}/steps/${encodeURIComponent(step)}?offset=${offset}`,
      { credentials: "omit" });
    const text = reply.ok ? await reply.text() : "";
    if (chosen !== step || panelOffset !== offset) return;  // another was opened meanwhile
    const panel = document.getElementById("step-detail");
    if (!reply.ok) { panel.textContent = `Could not load step ${step} (${reply.status}).`; return; }
    panel.innerHTML = text;  // server-rendered, every value escaped
    const single = panel.querySelector("[data-log-jid]");
    if (follow) {
      const jid = options.jid || (single && single.dataset.logJid);
      const state = single && single.dataset.logJid === jid ? single.dataset.logState : "";
      section.dispatchEvent(new CustomEvent("flows:step-opened",
        { detail: { step, jid, restore: !!options.restore } }));
      if (jid) followLog(jid, { ...options, state });
    }
  }

  function followLog(jid, options = {}) {
    if (window.FlowsLog) window.FlowsLog.open(jid, options);
  }

  section.addEventListener("click", (e) => {
    const node = e.target.closest("g.node");
    if (node) { openStep(node.dataset.step, 0, true); return; }
    const more = e.target.closest("[data-panel-offset]");
    if (more) { openStep(chosen, Number(more.dataset.panelOffset), false); return; }
    const log = e.target.closest("[data-log]");
    if (log) {
      section.dispatchEvent(new CustomEvent("flows:step-opened",
        { detail: { step: chosen, jid: log.dataset.log } }));
      followLog(log.dataset.log, { state: log.dataset.logState });
    }
  });
  section.addEventListener("flows:open-step", (e) => {
    const { step, jid, attempt, line, restore } = e.detail;
    openStep(step, 0, true, { jid, attempt, line, restore: !!restore });
  });
  section.addEventListener("keydown", (e) => {
    const node = e.target.closest("g.node");
    if (node && (e.key === "Enter" || e.key === " ")) {
      e.preventDefault();
      openStep(node.dataset.step, 0, true);
    }
  });

  // One stream for the whole page: an event about one of the run's jobs redraws every node
  // from one request. The engine announces no job start, so while the run is running the page
  // also redraws every few seconds (less often for a run that is slow to read).
  const events = new EventSource("/api/v1/events");
  events.onmessage = (e) => {
    const data = JSON.parse(e.data);
    if ((data.jid && data.jid.startsWith(runId + ":")) || data.run === runId) soon();
  };
  function tick() {
    if (section.dataset.status === "running") soon();
    setTimeout(tick, every);
  }
  setTimeout(tick, every);
}

document.addEventListener("DOMContentLoaded", () => {
  setupToken();
  setupActions();
  const run = document.getElementById("run");
  if (run) setupRun(run);
});
