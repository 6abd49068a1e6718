// flows ui: the step panel's "why?" button asks the engine why the step is where it is
// (GET /api/v1/runs/{run}/explain?step=...) and shows each job's sentence, as text.
"use strict";

document.addEventListener("click", async (e) => {
  const button = e.target.closest("button[data-why-run]");
  if (!button) return;
  const out = button.parentElement.querySelector(".why-text");
  out.textContent = "…";
  const url = "/api/v1/runs/" + encodeURIComponent(button.dataset.whyRun)
    + "/explain?step=" + encodeURIComponent(button.dataset.whyStep);
  const reply = await fetch(url, { credentials: "omit" }).catch(() => null);
  if (!reply || !reply.ok) {
    out.textContent = await whyRefusal(reply);
    return;
  }
  const data = await reply.json();
  const step = data.steps[0] || { jobs: [] };
  const jobs = step.jobs;
  out.textContent = "";
  // A step with no items says so (the engine's words), then its job's reason while it waits.
  if (step.no_items) {
    const line = document.createElement("div");
    line.textContent = step.no_items;
    out.append(line);
  }
  if (!jobs.length && step.no_items) return;
  if (!jobs.length) { out.textContent = "Nothing holds it back."; return; }
  for (const job of jobs) {
    const line = document.createElement("div");
    line.textContent = jobs.length > 1 ? `${job.jid}: ${job.sentence}` : job.sentence;
    out.append(line);
  }
});

// What a refused explain says: the API's `detail` in words (a run gone, a step it does not
// have), or its status when the reply holds none. Put into the page as text.
async function whyRefusal(reply) {
  if (!reply) return "Could not ask why (no answer).";
  let detail = "";
  try { detail = detailText((await reply.json()).detail); } catch (error) { detail = ""; }
  if (!detail) return `Could not ask why (${reply.status}).`;
  return `Could not ask why: ${detail.replace(/\.$/, "")}.`;
}
