// flows ui: the run page's URL names what is open: ?step=S (&job=JID for one item of a
// foreach step, &attempt=N for an attempt chosen, &line=L for a line linked), so a link opens
// the page as it was shared, and back and forward step through what was opened. A failed run
// opened without a step opens its first failed step (in the flow's order).
"use strict";

(function () {
  const KEYS = ["step", "job", "attempt", "line"];

  function wanted() {
    const query = new URLSearchParams(location.search);
    const out = {};
    for (const key of KEYS) if (query.get(key)) out[key] = query.get(key);
    return out;
  }

  function urlOf(state) {
    const query = new URLSearchParams(location.search);
    for (const key of KEYS) {
      if (state[key]) query.set(key, String(state[key])); else query.delete(key);
    }
    const text = query.toString();
    return location.pathname + (text ? "?" + text : "") + location.hash;
  }

  function setup(section) {
    const runId = section.dataset.run;
    let current = wanted();

    function save(state, replace) {
      const url = urlOf(state);
      current = state;
      if (url === location.pathname + location.search + location.hash) return;
      if (replace) history.replaceState(state, "", url);
      else history.pushState(state, "", url);
    }

    function open(state) {
      const number = (v) => (v ? Number(v) || undefined : undefined);
      section.dispatchEvent(new CustomEvent("flows:open-step", {
        detail: {
          step: state.step, jid: state.job, attempt: number(state.attempt), line: number(state.line),
          restore: true,
        },
      }));
    }

    function firstFailed() {
      const node = section.querySelector("g.node.st-failed, g.node.st-expired");
      return node ? node.dataset.step : null;
    }

    section.addEventListener("flows:step-opened", (e) => {
      const { step, jid, restore } = e.detail;
      const state = { step };
      if (jid && jid !== `${runId}:${step}`) state.job = jid;
      if (restore && current.step === step && (current.job || null) === (state.job || null)) {
        if (current.attempt) state.attempt = current.attempt;
        if (current.line) state.line = current.line;
      }
      save(state, restore);  // what a link or back opens replaces; a click adds an entry
    });
    section.addEventListener("flows:log-opened", (e) => {
      const state = { ...current };
      if (e.detail.chosen) { state.attempt = String(e.detail.attempt); delete state.line; save(state, false); }
    });
    section.addEventListener("flows:log-line", (e) => {
      const state = { ...current, line: String(e.detail.line) };
      if (e.detail.attempt) state.attempt = String(e.detail.attempt);
      save(state, true);
    });
    window.addEventListener("popstate", () => {
      current = wanted();
      if (current.step) open(current);
    });

    if (current.step) open(current);
    else if (section.dataset.status === "failed" && firstFailed()) {
      open({ step: firstFailed() });
    }
  }

  document.addEventListener("DOMContentLoaded", () => {
    const run = document.getElementById("run");
    if (run) setup(run);
  });
})();
