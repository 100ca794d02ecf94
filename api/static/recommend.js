// The recommendation: POST /v1/recommendations for the controls (debounced), shown only while it still
// answers them; a refit of the stored workload meanwhile loads all its modes again.

import { checkedCap, markFeasible, showCap } from "./cap.js";
import { drawPareto } from "./chart.js";
import { showChoice, showFront, showPresets } from "./choice.js";
import { deviceName } from "./devices.js";
import { drawHeatmap } from "./heatmap.js";
import { postJson } from "./http.js";
import { dataKey, recKey, safeKey, sameKey } from "./keys.js";
import { epochsValue } from "./limits.js";
import { beginLoad, failFor, loadFor, retryLoad } from "./load.js";
import { $, drop, state } from "./state.js";
import { markStale, setBusy, setState } from "./status.js";

const MAX_REFITS = 3;  // loads in a row that newer fits (uploads meanwhile) may start: countRefit

export function abortRecommendation() {
  clearTimeout(state.recTimer);
  state.recSeq++;  // an answer to an earlier request must not be shown
  if (state.recAbort) state.recAbort.abort();
  state.recAbort = null;
}

export function scheduleRecommend() {
  showCap();
  if (retryLoad()) return;  // a failed load: load again, and that load asks with these controls
  // Before a load has its data there is nothing to ask about: the load asks with the controls as they are
  // then. Once it has them (its recommendation in flight), a change asks again and drops that answer.
  if (!state.data) return;
  abortRecommendation();
  const [problem, capError] = checkInputs();
  if (problem) {
    // The recommendation in flight (the load's own, maybe) is cancelled and none is asked: the device's
    // data stay on screen and the controls are free again, as recommend() leaves them for a bad number.
    markStale();
    setBusy(false);
    setState("error", problem);
    if (capError && capError.askService) {
      const gen = state.gen;
      state.recTimer = setTimeout(() => explainCap(gen), 150);
    }
    return;
  }
  markStale();
  state.refits = 0;  // the user's choice: a newer fit may be loaded again
  setState("loading", "Choosing the best mode…");
  const gen = state.gen;
  state.recTimer = setTimeout(() => recommend(gen).catch(failFor(gen)), 150);
}

// The epochs and cap boxes checked, each error beside its box: [all of them in one line ("" when none),
// the cap's error or null].
function checkInputs() {
  const problems = [];
  let capError = null;
  for (const [check, out] of [[epochsValue, "epochs-error"], [checkedCap, "cap-error"]]) {
    try {
      check();
      $(out).textContent = "";
    } catch (err) {
      $(out).textContent = err.message;
      problems.push(err.message);
      if (out === "cap-error") capError = err;
    }
  }
  return [problems.join("; "), capError];
}

// A power cap the page refuses, asked of the service: its refusal names a likely unit slip ("it looks like
// milliwatts (15 W)") by rules the OpenAPI document does not state, and replaces the page's own words beside
// the box and on the status line. Dropped once any control changes; a cap taken after all, or a failure,
// leaves the page's words.
async function explainCap(gen) {
  const data = state.data;
  if (gen !== state.gen || !data) return;
  abortRecommendation();
  const seq = state.recSeq;
  const controller = new AbortController();
  state.recAbort = controller;
  // The cap as typed (the page refused it; the service's words say why), without the epochs box's value.
  const key = { ...data.key, objective: $("objective").value, epochs: null };
  const body = recBody(key, { [$("cap-kind").value]: Number($("cap-number").value) });
  try {
    await postJson("/v1/recommendations", body, "application/json", null, controller.signal);
  } catch (err) {
    if (seq !== state.recSeq || gen !== state.gen || err.name === "AbortError") { drop(); return; }
    if (err.status !== 422) return;
    $("cap-error").textContent = err.message;
    setState("error", [$("epochs-error").textContent, err.message].filter(Boolean).join("; "));
  }
}

// The body of POST /v1/recommendations for `key` (recKey's fields), its `constraints` unless given.
function recBody(key, constraints = key.constraints) {
  const body = { device: key.device, workload: state.workloadRef, objective: key.objective, constraints,
    confidence: key.confidence };
  if (key.epochs !== null) body.epochs = key.epochs;
  return body;
}

export async function recommend(gen) {
  const data = state.data;
  if (gen !== state.gen || !data) return;
  const [problem, capError] = checkInputs();
  if (problem) {  // a bad epochs or cap box: the device's data are shown, the choice waits for valid numbers
    setBusy(false);
    setState("error", problem);
    if (capError && capError.askService) await explainCap(gen);
    return;
  }
  const key = recKey();
  if (!sameKey(data.key, dataKey())) { drop(); return; }
  abortRecommendation();
  const seq = state.recSeq;
  state.recAbort = new AbortController();
  const body = recBody(key);
  if (!state.loading) setState("loading", "Choosing the best mode…");
  const rec = await postJson("/v1/recommendations", body, "application/json", null, state.recAbort.signal);
  // Shown only if nothing changed since it was asked: same generation, same request, same controls.
  if (seq !== state.recSeq || gen !== state.gen || data !== state.data || !sameKey(key, safeKey())) {
    drop();
    return;
  }
  if (rec.device !== key.device) throw new Error(`the answer is for ${rec.device}, not ${key.device}`);
  if ((rec.revision ?? null) !== data.revision) {
    // The stored workload was refitted (an upload) since its modes were loaded: the cloud, the presets and
    // the choice must come from one fit, so all of them are loaded again (a few times at most in a row).
    drop();
    countRefit();
    const gen2 = beginLoad(`The workload was refitted (revision ${rec.revision}): loading its modes again…`);
    loadFor(gen2, false).catch(failFor(gen2));
    return;
  }
  state.refits = 0;
  state.rec = rec;
  const t0 = performance.now();
  markFeasible();
  showChoice(rec, key);
  showPresets(rec);
  showFront(rec);
  drawPareto(false);
  drawHeatmap();
  document.body.dataset.redrawMs = (performance.now() - t0).toFixed(1);
  document.body.dataset.readyMs = performance.now().toFixed(0);  // since navigation started
  document.body.dataset.request = JSON.stringify(key);
  document.body.dataset.device = key.device;
  document.body.dataset.revision = data.revision === null ? "" : String(data.revision);
  $("choice").classList.remove("stale");
  $("stale-badge").hidden = true;
  setBusy(false);  // and Copy, now that the answer is current
  setState("ready", rec.feasible
    ? `${deviceName(key.device)}: ${data.n.toLocaleString("en")} modes predicted; ${rec.pareto.length} on the ` +
      "time–energy front within the cap."
    : `${deviceName(key.device)}: ${rec.reason || "no mode meets the cap"}`);  // the reason says it
}

// One more load in a row for a newer fit of the workload; past MAX_REFITS the page stops loading and says
// which choices load it again (each starts the count again: reload, scheduleRecommend, upload).
export function countRefit() {
  if (++state.refits <= MAX_REFITS) return;
  const err = new Error("the stored workload keeps being refitted while it loads (uploads keep arriving): " +
    "choose the device, workload or coverage, or change the objective, cap or epochs, to load it again");
  err.saysRetry = true;  // failFor adds no hint of its own
  throw err;
}
