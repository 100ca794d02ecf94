// The limits the API states in its OpenAPI document (coverage, epochs, caps, objectives, the stored-workload
// page, the search box, the profile columns' types), read at run time: none of them is restated in the page.

import { percent } from "./format.js";
import { api } from "./http.js";
import { linked, readLinkChoices } from "./link.js";
import { $, WORKLOAD_PAGE, state } from "./state.js";

// Coverages offered, as shares; those outside the API's range (read from /openapi.json) are left out.
const COVERAGES = [0.5, 0.8, 0.9, 0.95, 0.99];
// The words for the objectives the page knows, in the order it offers them (the first is chosen at start: the
// page opens on a power cap). Which objectives exist is the API's enum: one the page has no words for is
// offered under its name, after these; one the API no longer takes is not offered.
const OBJECTIVE_WORDS = { "min-energy": "least energy per epoch", "min-time": "shortest epoch" };

// The allowed coverage and epochs come from the service's OpenAPI document, not restated here; the
// fields holding totals for `epochs` epochs are those the document describes as such.
export async function loadLimits() {
  const spec = await api("/openapi.json");
  const schemas = spec.components.schemas;
  const props = schemas.RecommendationRequest.properties;
  const limits = {
    confidence: { min: props.confidence.minimum, max: props.confidence.maximum, def: props.confidence.default },
    epochs: { min: props.epochs.minimum, max: props.epochs.maximum },
    maxPowerW: devicePowerLimits(schemas.RecommendationRequest),
    caps: capLimits(schemas.Constraints || { properties: {} }),
  };
  const totals = {};
  for (const [name, p] of Object.entries(schemas.Prediction.properties)) {
    if (/_(low|high)$/.test(name) || !/`epochs` epochs/.test(p.description || "")) continue;
    if (/^s\b/.test(p.description)) totals.time = name;
    if (/^J\b/.test(p.description)) totals.energy = name;
  }
  state.totals = totals;
  // How many stored workloads one page may list: a chosen one outside the first page is looked up by id.
  const listing = ((spec.paths["/v1/workloads"] || {}).get || {}).parameters || [];
  const limit = listing.find((p) => p.name === "limit");
  const most = limit && limit.schema && limit.schema.maximum;
  state.lookupLimit = Number.isSafeInteger(most) && most >= WORKLOAD_PAGE ? most : WORKLOAD_PAGE;
  // The search box holds no more than the API takes (a longer text is a 422, not a search).
  const search = listing.find((p) => p.name === "search");
  const longest = search && search.schema && search.schema.maxLength;
  if (Number.isSafeInteger(longest)) $("workload-search").maxLength = longest;
  // The JSON type of each profile-row column (a device's row variant; all variants type them alike).
  const rowRef = schemas.ProfileUpload.properties.rows.oneOf[0].items.$ref;
  const rowProps = schemas[rowRef.split("/").pop()].properties;
  state.columnTypes = new Map(Object.entries(rowProps).map(([name, p]) => [name, p.type]));
  const { min, max, def } = limits.confidence;
  const values = Array.from(new Set(COVERAGES.filter((v) => v >= min && v <= max).concat([def])))
    .sort((a, b) => a - b);
  $("confidence").replaceChildren(...values.map((v) => new Option(percent(v), String(v))));
  $("confidence").value = String(def);
  $("objective").replaceChildren(...objectiveOrder(props.objective.enum)
    .map((name) => new Option(OBJECTIVE_WORDS[name] || name, name)));
  // the link's objective where the API has it; else the first, saying so
  const objective = linked("objective");
  if (props.objective.enum.includes(objective)) $("objective").value = objective;
  const shown = $("objective").selectedOptions[0];
  state.linkNotes.objective = objective && $("objective").value !== objective ? `The link's objective ` +
    `"${objective}" is not one the service takes; showing ${shown ? shown.textContent : "none"} instead.` : "";
  state.scatterWarnRel = scatterWarnRel(schemas.PredictionResponse);
  $("epochs").min = String(limits.epochs.min);
  $("epochs").max = String(limits.epochs.max);
  state.limits = limits;  // last: a load that failed half-way is read again in full
  // the link's coverage and epochs, in the select just filled and the range just read, before the first
  // requests read the controls (after a failed start, the first load that reads the limits); it shows the
  // link's notes, the objective's above too
  readLinkChoices();
}

// The scatter of a fit's rows about it (rows_scatter_rel, a ratio) above which the service warns that the
// model's form misses the workload, as its document states it (x-jetpredict-warn-above); null where it
// states none (the page then shows the scatter without a judgement).
function scatterWarnRel(schema) {
  const field = ((schema && schema.properties) || {}).rows_scatter_rel;
  const level = field && field["x-jetpredict-warn-above"];
  return typeof level === "number" && Number.isFinite(level) ? level : null;
}

// The API's objectives, those the page has words for first, in OBJECTIVE_WORDS' order.
function objectiveOrder(names) {
  const known = Object.keys(OBJECTIVE_WORDS);
  const rank = (name) => (known.includes(name) ? known.indexOf(name) : known.length);
  return [...names].sort((a, b) => rank(a) - rank(b));
}

// The caps the API takes, by kind: {min, max, above} (above: min itself is refused, as for time caps).
function capLimits(schema) {
  const out = {};
  for (const [kind, p] of Object.entries(schema.properties || {})) {
    out[kind] = { min: p.minimum ?? 0, max: p.maximum ?? Infinity, above: p.exclusiveMinimum === true };
  }
  return out;
}

// The largest power cap the API takes per device ({device: W}), from the rule the document states for
// constraints.max_power_w (x-jetpredict-rules "device-max"); {} when it states none.
function devicePowerLimits(schema) {
  const rule = (schema["x-jetpredict-rules"] || []).find((r) => r.rule === "device-max" &&
    [].concat(r.field).join(".") === "constraints.max_power_w");
  return (rule && rule.max) || {};
}

// The epochs box: null (empty: per epoch only) or a whole number in the API's range; else throws with
// the field and the rule. A whole number may be written as the API takes it ("1e3", "30.0"). A number
// box holding text it cannot parse ("e", "1e", "--") reads as "", with validity.badInput: that is no
// empty box, and gets the same error as any other bad number.
export function epochsValue() {
  const box = $("epochs");
  const { min, max } = state.limits.epochs;
  const refuse = (got) => new Error(`epochs: must be a whole number from ${min.toLocaleString("en")} to ` +
    `${max.toLocaleString("en")} (empty: one epoch), got ${got}`);
  if (box.validity.badInput) throw refuse("text that is not a number");
  const text = box.value.trim();
  if (!text) return null;
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n < min || n > max) throw refuse(`"${text}"`);
  return n;
}

// The largest power cap the API takes for `device` (W; undefined when the document states none).
export const maxPowerW = (device) => state.limits.maxPowerW[device];
