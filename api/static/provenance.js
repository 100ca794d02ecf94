// Where the numbers come from: the list under "Where the numbers come from", from the all-mode answer and
// each recommendation.

import { deviceName } from "./devices.js";
import { percent } from "./format.js";
import { $, state } from "./state.js";

const SOURCE_TEXT = {
  published: "published measurements (POMACS 2022)",
  measured: "measured sweeps",
  simulated: "digital twin (simulated)",
};
const sourceText = (source) => SOURCE_TEXT[source] || source;

// What an answer says about where its numbers come from (top-level fields; an all-mode answer in the
// columns layout also states cross_device, power_source and confidence once, for every mode).
const PROVENANCE = ["device", "model_version", "reference_source", "workload_source", "profiled_modes",
  "workload_id", "workload_devices", "rows_device", "cross_device", "power_source", "confidence",
  "aliased_knobs", "rows_scatter_rel"];

export function provenanceOf(answer) {
  const out = {};
  for (const k of PROVENANCE) if (answer && answer[k] !== undefined && answer[k] !== null) out[k] = answer[k];
  return out;
}

// The fit's caveats (aliased_knobs, rows_scatter_rel), worded as `jetpredict predict` and `fit` word them
// (predictor/cli.py _log_fit_caveats, predictor/fit_check.py). The scatter is judged against the level the
// service warns above (read from its OpenAPI document: state.scatterWarnRel), not a number of the page's.
function aliasedWords(aliased) {
  if (aliased === undefined || aliased === null) return "– (the answer does not say)";
  const knobs = Object.entries(aliased);
  if (!knobs.length) return "none";
  return `${knobs.map(([knob, why]) => `${knob} (${why})`).join(", ")}: the profiled modes do not separate ` +
    "their effects; predictions along them take their split from the reference";
}

// The rows' scatter about the fit in words, and whether it is past the service's warning level.
function scatterWords(rel, profiledModes) {
  if (rel === undefined || rel === null) return "– (the answer does not say)";
  const rows = `the rows of the ${profiledModes ?? "?"} profiled mode(s) scatter ${(rel * 100).toFixed(1)}% ` +
    "(RMS) about the fitted model";
  const level = state.scatterWarnRel;
  if (level === null) return rows;
  const levelWords = `${Math.round(level * 100)}%`;
  return rel > level
    ? `warning: ${rows}: more than run-to-run noise explains (> ${levelWords}), so the model's form misses ` +
      "this workload here; its intervals carry the scatter as noise, and modes far from the profiled ones may " +
      "be off by more"
    : `${rows}: within what run-to-run noise explains (<= ${levelWords})`;
}

// true, false, or null when no answer says: the chosen mode's own flag, else whose rows the recommendation
// rests on, else the all-mode answer's flag (or its rows_device).
function crossDevice(rec, best, all) {
  if (best && typeof best.cross_device === "boolean") return best.cross_device;
  if (rec && rec.rows_device && rec.device) return rec.rows_device !== rec.device;
  if (typeof all.cross_device === "boolean") return all.cross_device;
  if (all.rows_device && all.device) return all.rows_device !== all.device;
  return null;
}

// Shown as soon as the all-mode answer is drawn (rec null), and again with each recommendation, whose
// fields win where it has them: with no mode under the cap (best null) the all-mode answer still says
// whether the predictions are cross-device and where the power comes from.
export function showProvenance(rec, best) {
  const info = state.workloadInfo || {};
  const all = state.provenance || {};
  const p = Object.assign({}, all, provenanceOf(rec));
  const device = p.device || (state.data && state.data.device) || $("device").value;
  const cross = crossDevice(rec, best, all);
  const rowsOn = p.rows_device && p.rows_device !== device ? `${deviceName(p.rows_device)} (${p.rows_device})`
    : "another device";
  const power = (best && best.power_source) || all.power_source || null;
  const rowsSource = p.workload_source || (info.kind === "builtin" ? info.source : null);
  const confidence = rec ? rec.confidence : (all.confidence ?? (state.data && state.data.key.confidence));
  const items = [
    ["predictions", `${p.model_version || "–"} (${rec ? "POST /v1/recommendations, " : ""}POST /v1/predictions)`],
    ["device", `${deviceName(device)} (${device})`],
    ["prior", p.reference_source ? sourceText(p.reference_source) : "–"],
    ["workload rows", info.kind === "builtin"
      ? `built-in: ${sourceText(info.source)}${info.citation && info.source === "published" ? ` — ${info.citation}` : ""}`
      : `stored workload ${info.id}` + (p.workload_source ? ` (${sourceText(p.workload_source)})` : "") +
        (state.data && state.data.revision !== null ? `, revision ${state.data.revision}` : "")],
    ["profiled modes", p.profiled_modes === undefined ? "–" : String(p.profiled_modes)],
    // never "no" unless an answer says so
    ["cross-device", cross === true ? `yes: fitted on rows of ${rowsOn}, predicted for ${device} (wider intervals)`
      : cross === false ? `no: fitted on ${device}'s own rows` : "– (the answer does not say)"],
    // the rows' own source (the answer's, else the built-in's listing): twin rows' power is simulated
    ["power", power === "reference"
      ? `device reference power model${p.reference_source ? `: ${sourceText(p.reference_source)}` : ""}` +
        " (no power in the rows; wider interval)"
      : power === "workload" ? `fitted on the workload's own power${rowsSource ? `: ${sourceText(rowsSource)}` : ""}`
        : (power || "–")],
    ["intervals", confidence === undefined || confidence === null ? "–"
      : `${percent(confidence)} (posterior, model form, run-to-run noise, extrapolation)`],
    ["aliased knobs", aliasedWords(p.aliased_knobs)],
    ["rows' scatter", scatterWords(p.rows_scatter_rel, p.profiled_modes)],
  ];
  if (p.workload_source && info.kind === "builtin") items.splice(4, 0, ["workload source", p.workload_source]);
  const dl = $("provenance");
  dl.replaceChildren();
  for (const [k, v] of items) {
    const dt = document.createElement("dt");
    dt.textContent = k;
    const dd = document.createElement("dd");
    dd.textContent = v;
    dd.dataset.key = k;
    if (v.startsWith("warning: ")) dd.className = "warning";
    dl.append(dt, dd);
  }
  dl.dataset.referenceSource = p.reference_source || "";
  dl.dataset.profiledModes = p.profiled_modes === undefined ? "" : String(p.profiled_modes);
  dl.dataset.crossDevice = cross === null ? "" : String(cross);
  dl.dataset.powerSource = power || "";
  dl.dataset.aliasedKnobs = p.aliased_knobs ? Object.keys(p.aliased_knobs).join(",") : "";
  dl.dataset.rowsScatterRel = p.rows_scatter_rel === undefined || p.rows_scatter_rel === null ? ""
    : String(p.rows_scatter_rel);
  dl.dataset.answer = rec ? "recommendation" : "predictions";  // the newest answer it draws on
}
