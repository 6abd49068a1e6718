// flows ui: a run's timeline (each step's wait and run as bars on one time axis, as Airflow's
// Gantt and Dagu's timeline draw them) and each step's duration under its node in the graph.
// Both come from /api/v1/runs/<id>/timeline, fetched again while the run runs. Text is put in
// with textContent only; bars are placed through element.style (no inline markup).
"use strict";

(function () {
  const SVG = "http://www.w3.org/2000/svg";

  function took(seconds) {
    if (seconds === null || seconds === undefined) return "";
    if (seconds < 60) return `${seconds.toFixed(1)} s`;
    const whole = Math.floor(seconds), minutes = Math.floor(whole / 60) % 60;
    const hours = Math.floor(whole / 3600);
    if (hours) return `${hours} h ${String(minutes).padStart(2, "0")} m`;
    return `${minutes} m ${String(whole % 60).padStart(2, "0")} s`;
  }

  function div(className, text) {
    const element = document.createElement("div");
    element.className = className;
    if (text !== undefined) element.textContent = text;
    return element;
  }

  // A bar on the track from `start` to `end` (epoch s), in percent of the axis.
  function bar(className, start, end, axis, title) {
    const element = div(className);
    const left = ((start - axis.from) / axis.span) * 100;
    const width = Math.max(((end - start) / axis.span) * 100, 0.3);
    element.style.left = `${Math.max(0, left)}%`;
    element.style.width = `${Math.min(width, 100 - Math.max(0, left))}%`;
    element.title = title;
    return element;
  }

  function rowText(row, now) {
    if (row.status === "skipped") return "skipped";
    if (row.started === null) return row.ready === null ? "" : `waiting ${took(now - row.ready)}`;
    if (row.finished === null) return `running ${took(now - row.started)}`;
    return took(row.finished - row.started);
  }

  function draw(box, data) {
    const now = data.now;
    const times = [];
    for (const row of data.steps) {
      for (const t of [row.ready, row.started, row.finished]) if (t !== null) times.push(t);
      if (row.started !== null && row.finished === null) times.push(now);
      if (row.ready !== null && row.started === null && row.status !== "skipped") times.push(now);
    }
    if (data.submitted) times.push(data.submitted);
    if (!times.length) { box.replaceChildren(div("muted", "Nothing has run yet.")); return; }
    const from = Math.min(...times), to = Math.max(...times);
    const axis = { from, span: Math.max(to - from, 0.001) };
    const rows = [];
    const head = div("tl-row tl-axis");
    head.append(div("tl-name", ""));
    const ticks = div("tl-track");
    for (const share of [0, 0.25, 0.5, 0.75, 1]) {
      const at = share * axis.span;
      const tick = div("tl-tick", "+" + (axis.span < 2 ? `${at.toFixed(2)} s` : took(at)));
      tick.style.left = `${share * 100}%`;
      ticks.append(tick);
    }
    head.append(ticks, div("tl-dur", ""));
    rows.push(head);
    for (const row of data.steps) {
      const line = div(`tl-row st-${row.status}`);
      line.dataset.step = row.step;
      const name = document.createElement("button");
      name.type = "button";
      name.className = "tl-name";
      name.textContent = row.step;
      name.title = `open ${row.step}`;
      const track = div("tl-track");
      const until = row.started !== null ? row.started : now;
      if (row.ready !== null && row.status !== "skipped" && until > row.ready) {
        track.append(bar("tl-wait", row.ready, until, axis, `${row.step} waited ${took(until - row.ready)}`));
      }
      if (row.attempts.length) {
        row.attempts.forEach(([start, end], i) => {
          const last = i === row.attempts.length - 1;
          const stop = end === null ? now : end;
          const label = `${row.step}: attempt ${i + 1}, ${took(stop - start)}${end === null ? " so far" : ""}`;
          track.append(bar(last ? "tl-run" : "tl-run tl-try", start, stop, axis, label));
        });
      } else if (row.started !== null) {
        const stop = row.finished === null ? now : row.finished;
        const label = `${row.step}: ${row.items} job${row.items === 1 ? "" : "s"}, ${took(stop - row.started)}`;
        track.append(bar("tl-run", row.started, stop, axis, label));
      }
      line.append(name, track, div("tl-dur", rowText(row, now)));
      rows.push(line);
    }
    box.replaceChildren(...rows);
  }

  // Each node of the graph shows its step's duration (or how long it has run) under it.
  function durations(section, data) {
    const svg = section.querySelector("svg#graph");
    if (!svg) return;
    const byStep = new Map(data.steps.map((row) => [row.step, row]));
    let added = false;
    for (const node of svg.querySelectorAll("g.node")) {
      const row = byStep.get(node.dataset.step);
      let text = node.querySelector("text.dur");
      if (!text) {
        const rect = node.querySelector("rect");
        text = document.createElementNS(SVG, "text");
        text.setAttribute("class", "dur");
        text.setAttribute("x", "4");
        text.setAttribute("y", String(Number(rect.getAttribute("height")) + 13));
        node.append(text);
        added = true;
      }
      text.textContent = row && row.started !== null ? rowText(row, data.now) : "";
    }
    if (added && !svg.dataset.durations) {  // room for the last row's durations
      svg.dataset.durations = "1";
      svg.setAttribute("height", String(Number(svg.getAttribute("height")) + 16));
    }
  }

  function setup(section) {
    const runId = section.dataset.run;
    const box = document.querySelector("#timeline .tl");
    let timer = null, busy = false;

    function shown(data, every) {
      if (box) draw(box, data);
      durations(section, data);
      clearTimeout(timer);
      if (data.status === "running") timer = setTimeout(load, every);
    }

    async function load() {
      if (busy) return;
      busy = true;
      clearTimeout(timer);
      const started = performance.now();
      try {
        const reply = await fetch(`/api/v1/runs/${encodeURIComponent(runId)}/timeline`,
          { credentials: "omit" }).catch(() => null);
        if (!reply || !reply.ok) return;
        // a big run costs the server more to read: fetched less often
        shown(await reply.json(), Math.max(5000, 5 * (performance.now() - started)));
      } finally {
        busy = false;
      }
    }

    if (box) {
      box.addEventListener("click", (e) => {
        const row = e.target.closest(".tl-row[data-step]");
        if (row && e.target.closest(".tl-name")) {
          section.dispatchEvent(new CustomEvent("flows:open-step", { detail: { step: row.dataset.step } }));
        }
      });
    }
    // the run page redraws its statuses as they change: the timeline follows
    new MutationObserver(() => load()).observe(section, { attributes: true, attributeFilter: ["data-status"] });
    // the page brings the first one; it is fetched again while the run runs
    const first = document.getElementById("timeline-data");
    if (first) shown(JSON.parse(first.textContent), 10000); else load();
  }

  document.addEventListener("DOMContentLoaded", () => {
    const run = document.getElementById("run");
    if (run) setup(run);
  });
})();
