// The page's link: what it asks for (?device=, ?workload=, ?objective=, ?cap= the cap's kind and
// ?max_power_w=W or ?max_epoch_time_s=s its value, ?confidence= the intervals' coverage as a share,
// ?epochs= the epochs totalled), the notes on what of it was not used, and the user's choices written back
// into it (history.replaceState), so that a reload shows what the user saw.

import { chosenCap } from "./cap.js";
import { epochsValue } from "./limits.js";
import { $, state } from "./state.js";

// The user's choices are written into the link this long after the last one: a dragged slider fires an
// input event per pixel, and browsers throttle frequent history changes.
const LINK_WRITE_MS = 250;

// What the page's link names for `name` ("" when nothing).
export const linked = (name) => new URLSearchParams(location.search).get(name) || "";

// The notes on what the page's link asked for and did not find; gone once the user chooses otherwise.
export function showLinkNote() {
  const text = Object.values(state.linkNotes).filter(Boolean).join(" ");
  $("link-note").textContent = text;
  $("link-note").hidden = !text;
}

export function clearLinkNote() {
  state.linkNotes = {};
  showLinkNote();
}

// The cap the link names, read at the page's start: ?cap= its kind (a constraint's name, or none), and
// ?KIND=value the cap the user chose of that kind (left out: the default). The kind is chosen now, the value
// taken by the first load (setupCap; a time cap holds for its device and workload, known only then). A
// kind the page does not offer, or a value that is no positive number, is left out, saying so.
export function readLinkCap() {
  const query = new URLSearchParams(location.search);
  const kinds = Array.from($("cap-kind").options).map((o) => o.value);
  const named = query.get("cap");
  if (named !== null && !kinds.includes(named)) {
    state.linkNotes.cap = `The link's cap "${named}" is not one of the page's cap kinds (${kinds.join(", ")}): ` +
      "left out.";
  }
  // a link naming only a cap's value (?max_power_w=12) names its kind too
  const kind = kinds.includes(named) ? named : kinds.find((k) => k !== "none" && query.has(k));
  if (!kind) return;
  $("cap-kind").value = kind;
  const text = query.get(kind);
  if (kind === "none" || text === null) return;
  const value = Number(text);
  if (text.trim() && Number.isFinite(value) && value > 0) state.linkCap = { kind, value };
  else state.linkNotes.capValue = `The link's ${kind} "${text}" is not a positive number: left out.`;
}

// The coverage and epochs the link names, chosen by loadLimits once it has filled the coverage select and
// read the epochs' range, before the first load reads the controls. A coverage
// the page does not offer, or epochs that are no whole number in the API's range, is left out, saying so.
export function readLinkChoices() {
  const query = new URLSearchParams(location.search);
  const coverage = query.get("confidence");
  if (coverage !== null) {
    const offered = Array.from($("confidence").options).map((o) => o.value);
    // a share may be written as the page writes it or not ("0.950"): the same number is the same coverage
    const match = coverage.trim() ? offered.find((v) => Number(v) === Number(coverage)) : undefined;
    if (match !== undefined) $("confidence").value = match;
    else state.linkNotes.confidence = `The link's coverage "${coverage}" is not one the page offers ` +
      `(${offered.join(", ")}): left out.`;
  }
  const epochs = query.get("epochs");
  if (epochs !== null) {
    // the epochs box's own rule judges it (epochsValue: a whole number in the API's range)
    $("epochs").value = epochs;
    const n = boxEpochs();
    $("epochs").value = n === null ? "" : String(n);
    if (n === null) {
      const { min, max } = state.limits.epochs;
      state.linkNotes.epochs = `The link's epochs "${epochs}" is not a whole number from ` +
        `${min.toLocaleString("en")} to ${max.toLocaleString("en")}: left out.`;
    }
  }
  showLinkNote();
}

// The user chose: the choices are written into the link, soon (LINK_WRITE_MS), the newest winning.
export function scheduleLinkWrite() {
  clearTimeout(state.linkTimer);
  state.linkTimer = setTimeout(writeLink, LINK_WRITE_MS);
}

// The device, workload, objective and cap kind shown, and the cap the user chose of that kind (chosenCap:
// the last one the API took; none written while the default is shown), in the link; the coverage and
// epochs too, but for the default coverage and an empty epochs box (one epoch); parameters of others are
// kept.
function writeLink() {
  const query = new URLSearchParams(location.search);
  const put = (name, value) => (value ? query.set(name, value) : query.delete(name));
  put("device", $("device").value);
  put("workload", $("workload").value);
  put("objective", $("objective").value);
  const kind = $("cap-kind").value, cap = chosenCap();
  put("cap", kind);
  for (const option of $("cap-kind").options) if (option.value !== "none") query.delete(option.value);
  if (typeof cap === "number") query.set(kind, String(cap));
  if (state.limits) {  // unread (the start failed): the coverage select holds no choice yet
    const coverage = $("confidence").value;
    put("confidence", Number(coverage) === state.limits.confidence.def ? "" : coverage);
    const epochs = boxEpochs();
    put("epochs", epochs === null ? "" : String(epochs));
  }
  const search = query.toString();
  history.replaceState(history.state, "", `${location.pathname}${search ? `?${search}` : ""}${location.hash}`);
}

// The epochs box's value the API takes; null when it is empty or not one (the box says what is wrong).
function boxEpochs() {
  try { return epochsValue(); } catch (err) { return null; }
}
