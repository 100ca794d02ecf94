// jetpredict mode chooser. Reads only the public HTTP API; draws every mode of a device on canvas from
// typed arrays (29,232 modes on AGX Xavier), so the page stays responsive.
//
// Flow: device + workload + coverage -> POST /v1/predictions (modes "all" in the columns layout; then
// "presets") -> typed arrays -> charts; objective + cap + epochs -> POST /v1/recommendations (debounced) -> chosen mode,
// Pareto front, command, presets compared.
//
// Every answer is tagged with the request it answers. A load (device, workload or coverage changed) has a
// generation number `gen`; changing any of them starts a new generation, clears what was shown for the
// old one at once (synchronously, in the change handler), aborts its requests, and any answer of an older
// generation that still arrives is dropped. A recommendation is shown only when the key it was asked for
// (device, workload, coverage, objective, constraints, epochs) equals the key of the controls when it
// arrives. While a device loads, the controls that depend on it are disabled and a progress bar runs.
// A load that fails (service down, a request unanswered within state.requestTimeoutMs) frees the
// controls, and the next change of any of them loads again: the device's workload list first when the
// list on screen is not this device's.
//
// document.body.dataset: state "loading" | "ready" | "error" (the browser test and the benchmark wait on
// it); device: the device of the answer on screen ("" while none); request: the key of that answer (JSON);
// dropped: stale answers dropped so far. Timings: renderMs (drawing all modes once parsed), paintMs (until
// the frame holding them is on screen), parseMs (answer columns to typed arrays), fetchMs (the API calls,
// JSON decoding included), redrawMs (a cap change), readyMs (since navigation).
//
// This module wires the controls to the modules below and starts the first load. Each module has one job
// (native ES modules, loaded by the browser as they are: no bundler, no build step):
//   state.js      the page's shared state, the element lookup $ and the count of dropped answers
//   format.js     numbers and intervals as people read them
//   http.js       requests: time limit, retries on 503/429 with Retry-After, errors in words
//   limits.js     the API's limits read from /openapi.json (coverage, epochs, caps, column types)
//   keys.js       which request an answer belongs to (the keys of a load and of a recommendation)
//   status.js     busy/ready on screen: status line, progress bar, controls enabled, stale badge, Copy
//   devices.js    the device list; link.js the page's link: what it asks for, its notes, the choices
//                 written back into it (a reload shows what the user saw)
//   workloads.js  the workload list: stored (paged, searched, looked up by id) and built-in workloads
//   load.js       a generation: one load of device, workload and coverage, its all-mode predictions
//                 (sets fetchMs, parseMs, renderMs, paintMs; recommend.js redrawMs and readyMs)
//   modes.js      the all-mode answer as typed arrays, and its indexes (clock steps, ranges, slices)
//   cap.js        the cap: slider and exact box, what the API takes, which modes meet it
//   recommend.js  POST /v1/recommendations, debounced and sequenced; refits of the workload meanwhile
//   choice.js     the answer shown: chosen mode, presets compared, the front as a table
//   provenance.js where the numbers come from
//   chart.js      the Pareto chart (uPlot axes, canvas point cloud) and the charts' text alternatives
//   heatmap.js    the clock heat map
//   csv.js        a profile CSV file read into rows; upload.js sends them (POST /v1/profiles)

import { onCapNumber, onCapSlider, powerSlider, setupCap, timeScale } from "./cap.js";
import { onResize } from "./chart.js";
import { drawHeatmap } from "./heatmap.js";
import { clearLinkNote, readLinkCap, scheduleLinkWrite } from "./link.js";
import { reload } from "./load.js";
import { recommend, scheduleRecommend } from "./recommend.js";
import { $, drop, state } from "./state.js";
import { holdWhileBusy } from "./status.js";
import { upload } from "./upload.js";
import { clearChangedWorkloadNote, searchWorkloads } from "./workloads.js";

function start() {
  readLinkCap();
  wire();
  reload(true);
}

// A choice of the user: the notes on what the page's link named go, and the link says the choices now.
function chose() {
  clearLinkNote();
  scheduleLinkWrite();
}

function wire() {
  $("device").addEventListener("change", () => { chose(); reload(true); });
  $("workload").addEventListener("change", () => { chose(); clearChangedWorkloadNote(); reload(false); });
  $("confidence").addEventListener("change", () => { chose(); reload(false); });
  $("workload-search").addEventListener("input", () => {
    clearTimeout(state.searchTimer);
    // after a failed device load the list may be another device's: list this one's, with the search
    if (!state.loading && state.listedFor !== $("device").value) { reload(true); return; }
    state.searchTimer = setTimeout(() => {
      const seq = state.searchSeq + 1;  // the one this call takes: a failure after a newer search is dropped
      searchWorkloads().catch((err) => {
        if (seq !== state.searchSeq) { drop(); return; }
        $("workload-note").textContent = `search failed: ${err.message}`;
      });
    }, 200);
  });
  $("objective").addEventListener("change", () => { chose(); scheduleRecommend(); });
  $("cap-kind").addEventListener("change", () => { chose(); if (state.data) setupCap(); scheduleRecommend(); });
  $("cap").addEventListener("input", () => { chose(); onCapSlider(); });
  $("cap-number").addEventListener("input", () => { chose(); onCapNumber(); });
  document.addEventListener("input", holdWhileBusy, true);
  document.addEventListener("change", holdWhileBusy, true);
  $("epochs").addEventListener("input", () => { chose(); scheduleRecommend(); });
  const manual = () => { $("hm-cores").dataset.auto = "0"; drawHeatmap(); };
  $("hm-cores").addEventListener("change", manual);
  $("hm-cpu").addEventListener("change", manual);
  $("copy").addEventListener("click", () => {
    if (navigator.clipboard) navigator.clipboard.writeText($("command").textContent).catch(() => {});
  });
  $("upload-button").addEventListener("click", upload);
  window.addEventListener("resize", onResize);
}

window.jetpredictPage = { state, recommend, reload, powerSlider, timeScale };
start();
