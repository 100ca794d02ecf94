// A load: a new generation for the device, workload and coverage chosen (what was shown goes at once, the
// old requests are aborted), its workload list when needed, and all its modes predicted and drawn.

import { setupCap } from "./cap.js";
import { describeCharts, drawPareto } from "./chart.js";
import { deviceName, loadDevices } from "./devices.js";
import { drawHeatmap, fillHeatmapSelectors } from "./heatmap.js";
import { postJson } from "./http.js";
import { dataKey, sameKey } from "./keys.js";
import { loadLimits } from "./limits.js";
import { fromColumns, indexModes } from "./modes.js";
import { provenanceOf, showProvenance } from "./provenance.js";
import { abortRecommendation, countRefit, recommend } from "./recommend.js";
import { $, drop, state } from "./state.js";
import { STEPS, progress, setBusy, setState } from "./status.js";
import { loadWorkloads, workloadRef } from "./workloads.js";

// A new generation: everything shown for the old device/workload/coverage goes, now, in this task.
export function beginLoad(message) {
  state.gen++;
  if (state.abort) state.abort.abort();
  state.abort = new AbortController();
  abortRecommendation();
  state.data = null;
  state.presets = null;
  state.rec = null;
  state.provenance = null;
  clearShown();
  setBusy(true);
  $("progress").value = 0;
  setState("loading", message);
  return state.gen;
}

function clearShown() {
  delete document.body.dataset.request;
  document.body.dataset.device = "";
  $("best").textContent = "–";
  $("best").dataset.mode = "";
  $("command").textContent = "–";
  $("command").dataset.mode = "";
  $("stale-badge").hidden = true;
  $("choice").classList.remove("stale");
  $("presets").tBodies[0].replaceChildren();
  $("front").tBodies[0].replaceChildren();
  $("best-note").textContent = "";
  $("best-note").hidden = true;
  $("preset-compare").textContent = "";
  $("provenance").replaceChildren();
  for (const k of Object.keys($("provenance").dataset)) delete $("provenance").dataset[k];
  $("tooltip").hidden = true;
  if (state.chart) { state.chart.destroy(); state.chart = null; }
  $("pareto").replaceChildren();
  $("pareto").dataset.device = "";
  const canvas = $("heatmap");
  canvas.getContext("2d").clearRect(0, 0, canvas.width, canvas.height);
  canvas.dataset.device = "";
  $("hm-legend").textContent = "";
  describeCharts();
  $("hm-cores").replaceChildren();  // the old board's clocks
  $("hm-cpu").replaceChildren();
  $("mode-count").textContent = "all";
}

// An error of the current generation is shown; one of an older generation (or an abort) is dropped.
export function failFor(gen) {
  return (err) => {
    if (gen !== state.gen || (err && err.name === "AbortError")) { drop(); return; }
    setBusy(false);  // the controls are free again: another choice may succeed
    // With nothing loaded, the next change of any control loads again (retryLoad), the device's
    // workload list first when the one shown is not this device's.
    const device = $("device").value;
    if (state.listedFor !== device && device) {
      $("workload-note").textContent = `the workloads of ${deviceName(device)} could not be listed yet`;
    }
    setState("error", `Error: ${err.message}` +
      (state.data || err.saysRetry ? "" : " (change any choice to try again)"));
  };
}

// After a failed load (nothing shown, nothing loading) a change of any control loads again, instead of
// asking about data the page does not have; true when it did.
export function retryLoad() {
  if (state.data || state.loading) return false;
  reload(false);
  return true;
}

export async function loadAll(gen) {
  if (gen !== state.gen) return;
  const key = dataKey();  // what this load answers: fixed for the whole generation
  const signal = state.abort.signal;
  const name = deviceName(key.device);
  progress(gen, 1, `Reading the workload for ${name}…`);
  const t0 = performance.now();
  const [ref, info] = await workloadRef(key, signal);
  if (gen !== state.gen) { drop(); return; }
  const count = (state.devices.find((d) => d.id === key.device) || {}).power_modes;
  progress(gen, 2, `Fitting the workload and predicting all ${count ? count.toLocaleString("en") : ""} modes of ${name}…`);
  const request = { device: key.device, workload: ref, confidence: key.confidence };
  // One after the other: the first fits the workload (heavy; the service admits few at once), the
  // presets then reuse that fit. The presets only mark the chart and the table: without them the
  // chooser still works, and says so.
  const all = await postJson("/v1/predictions", Object.assign({ modes: "all", layout: "columns" }, request),
    "application/json", null, signal);
  if (gen !== state.gen) { drop(); return; }
  if (all.device !== key.device) throw new Error(`the answer is for ${all.device}, not ${key.device}`);
  const presets = await postJson("/v1/predictions", Object.assign({ modes: "presets" }, request),
    "application/json", null, signal)
    .catch((err) => (err.name === "AbortError" ? Promise.reject(err) : { device: key.device, error: err }));
  if (gen !== state.gen || !sameKey(key, dataKey())) { drop(); return; }
  if (presets.device !== key.device) throw new Error(`the answer is for ${presets.device}, not ${key.device}`);
  // An upload refitted the workload between the two answers: ask both again, from one fit.
  if (presets.revision !== undefined && presets.revision !== all.revision) {
    countRefit();
    return loadAll(gen);
  }
  state.presetsError = presets.error ? presets.error.message : null;
  const t1 = performance.now();
  const data = fromColumns(all);
  data.key = key;
  data.device = key.device;
  data.revision = all.revision ?? null;  // a stored workload's fit (null: inline rows)
  document.body.dataset.fetchMs = (t1 - t0).toFixed(0);
  state.data = data;
  state.presets = presets.predictions || [];
  state.workloadRef = ref;
  state.workloadInfo = info;
  state.provenance = provenanceOf(all);
  indexModes(data);
  setupCap();
  fillHeatmapSelectors();
  const t2 = performance.now();
  drawPareto(true);
  drawHeatmap();
  showProvenance(null, null);  // the all-mode answer's own, until (or unless) a recommendation says more
  document.body.dataset.renderMs = (performance.now() - t2).toFixed(1);
  // uPlot draws in a microtask and the browser rasterises at the next frame: time until that frame is done.
  await new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0)));
  if (gen !== state.gen) { drop(); return; }
  document.body.dataset.paintMs = (performance.now() - t2).toFixed(1);
  document.body.dataset.parseMs = (t2 - t1).toFixed(1);
  document.body.dataset.modes = String(data.n);
  $("mode-count").textContent = `all ${data.n.toLocaleString("en")}`;
  progress(gen, 3, `Choosing the best mode of ${name}…`);
  await recommend(gen);
}

// A new load; the workload list first when asked (`withWorkloads`: the device or the upload changed it)
// or when the one shown is not this device's (its load failed); the devices and the API's limits first
// when the page's start failed to read them.
export function reload(withWorkloads) {
  state.refits = 0;  // every caller is a user's choice (or the page's start)
  const name = $("device").value ? deviceName($("device").value) : "devices";
  const gen = beginLoad(`Loading ${name}… (step 1 of ${STEPS})`);
  loadFor(gen, withWorkloads).catch(failFor(gen));
}

export async function loadFor(gen, withWorkloads) {
  if (!state.devices.length || !state.limits) {
    await Promise.all([state.devices.length ? null : loadDevices(), state.limits ? null : loadLimits()]);
    if (gen !== state.gen) { drop(); return; }
  }
  const device = $("device").value;
  if (withWorkloads || state.listedFor !== device) {
    progress(gen, 0, `Loading ${deviceName(device)}: its workloads…`);
    if (!(await loadWorkloads(gen))) { drop(); return; }
  }
  await loadAll(gen);
}
