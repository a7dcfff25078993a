// The web UI's only script: draws each page's figures with vega-embed (served by the
// service, /ui/static/vega.js) and follows a job's progress by polling its status.
"use strict";

async function drawFigures() {
  for (const el of document.querySelectorAll("[data-vega-spec]")) {
    const spec = JSON.parse(document.getElementById(el.dataset.vegaSpec).textContent);
    try {
      await vegaEmbed(el, spec, { renderer: "svg", actions: { export: true, source: false, compiled: false, editor: false } });
      el.dataset.drawn = "yes";
    } catch (err) {
      el.textContent = "The figure could not be drawn: " + err;
      el.dataset.drawn = "error";
    }
  }
}

function followJob(box) {
  const $ = (id) => document.getElementById(id);
  async function poll() {
    let job;
    try {
      const r = await fetch(box.dataset.jobStatus, { credentials: "same-origin", cache: "no-store" });
      if (r.status === 401) { $("job-error").textContent = "Logged out: log in again to follow the job."; return; }
      job = await r.json();
      if (!r.ok) { $("job-error").textContent = job.detail || r.statusText; return; }
    } catch (err) {
      setTimeout(poll, 3000);  // the service restarting: keep trying
      return;
    }
    $("job-state").textContent = job.state;
    $("job-state").className = "state-" + job.state;
    $("job-progress").value = job.progress;
    $("job-percent").textContent = Math.round(100 * job.progress) + "%";
    $("job-message").textContent = job.message;
    if (job.state === "queued" || job.state === "running") { setTimeout(poll, 1000); return; }
    const cancel = document.getElementById("cancel-form");
    if (cancel) cancel.remove();
    if (job.plan_id) $("job-result").innerHTML = '<a id="job-link" href="/ui/plans/' + encodeURIComponent(job.plan_id) + '">the plan</a>';
    else if (job.schedule_id) $("job-result").innerHTML = '<a id="job-link" href="/ui/schedules/' + encodeURIComponent(job.schedule_id) + '">the schedule</a>';
    if (job.error) $("job-error").textContent = job.error.detail || JSON.stringify(job.error);
    box.dataset.finished = job.state;
  }
  poll();
}

// The plan form offers only the profiles measured on the chosen platform's devices
// (a profile with another device is refused: "unknown device").
function fitProfiles(form) {
  const platform = form.querySelector("#form-platform"), profile = form.querySelector("#form-profile");
  if (!platform || !profile) return;
  function apply() {
    const opt = platform.selectedOptions[0];
    const have = new Set(opt && opt.dataset.devices ? opt.dataset.devices.split(",") : []);
    let firstFit = null;
    for (const o of profile.options) {
      const need = o.dataset.devices ? o.dataset.devices.split(",") : [];
      const ok = !opt || !opt.dataset.devices || need.every((d) => have.has(d));
      o.hidden = !ok;
      if (ok && firstFit === null) firstFit = o;
    }
    if (profile.selectedOptions[0] && profile.selectedOptions[0].hidden) profile.value = firstFit ? firstFit.value : "";
  }
  platform.addEventListener("change", apply);
  apply();
}

if (window.vegaEmbed) drawFigures();
const planForm = document.getElementById("plan-form");
if (planForm) fitProfiles(planForm);
const jobBox = document.querySelector("[data-job-status]");
if (jobBox) followJob(jobBox);
