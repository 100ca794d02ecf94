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
  "workload_id", "workload_devices", "rows_device", "cross_device", "power_source", "confidence"];

export function provenanceOf(answer) {
  const out = {};
  for (const k of PROVENANCE) if (answer && answer[k] !== undefined && answer[k] !== null) out[k] = answer[k];
  return out;
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
    dl.append(dt, dd);
  }
  dl.dataset.referenceSource = p.reference_source || "";
  dl.dataset.profiledModes = p.profiled_modes === undefined ? "" : String(p.profiled_modes);
  dl.dataset.crossDevice = cross === null ? "" : String(cross);
  dl.dataset.powerSource = power || "";
  dl.dataset.answer = rec ? "recommendation" : "predictions";  // the newest answer it draws on
}
