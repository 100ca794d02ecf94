// The cap: its kind, the slider (power linear, time on a log scale) and the exact number box beside it,
// what the API takes for the device shown, and which modes meet it.

import { deviceName } from "./devices.js";
import { fmt } from "./format.js";
import { dataKey } from "./keys.js";
import { maxPowerW } from "./limits.js";
import { scheduleRecommend } from "./recommend.js";
import { $, state } from "./state.js";
import { syncDisabled } from "./status.js";

// Positions of the time-cap slider, on a log scale from the least to the largest cap that matters: each
// moves the cap by the same share (0.5% over a 100-fold span); the number box beside it is exact.
const TIME_POSITIONS = 1000;

// The cap as the number box holds it (exact; NaN when it holds no number), null with no cap chosen.
function capValue() {
  const kind = $("cap-kind").value;
  if (kind === "none") return null;
  const box = $("cap-number");
  return box.validity.badInput || !box.value.trim() ? NaN : Number(box.value);
}

// The range of caps the API takes for `kind` on the device shown: [least, most, least refused too].
function capAllowed(kind) {
  const rule = (state.limits && state.limits.caps[kind]) || { min: 0, max: Infinity, above: true };
  const device = $("device").value;
  const most = kind === "max_power_w" && state.limits && maxPowerW(device) !== undefined
    ? Math.min(rule.max, maxPowerW(device)) : rule.max;
  return [rule.min, most, rule.above];
}

// The cap box's value if the API takes it; else throws naming the field and the rule. A power cap that is
// a number out of range is marked `askService`: the service's refusal says more (a likely unit slip, "it
// looks like milliwatts (15 W)", by rules the OpenAPI document does not state), and the page asks for it.
export function checkedCap() {
  const kind = $("cap-kind").value, cap = capValue();
  if (cap === null) return null;
  const [least, most, above] = capAllowed(kind);
  const unit = kind === "max_power_w" ? "W" : "s";
  if (!Number.isFinite(cap) || (above ? cap <= least : cap < least) || cap > most) {
    const box = $("cap-number").value.trim();
    const err = new Error(`constraints.${kind}: must be a number ${above ? "above" : "from"} ${fmt(least)} ` +
      `${above ? "" : "to "}${above ? "and at most " : ""}${fmt(most)} ${unit}` +
      `${kind === "max_power_w" ? ` (the most ${deviceName($("device").value)} takes)` : ""}, ` +
      `got ${box ? `"${box}"` : "nothing"}`);
    err.askService = kind === "max_power_w" && Number.isFinite(cap);
    throw err;
  }
  return cap;
}

// The cap the API takes from the box (null: no cap chosen), or undefined where it refuses the box.
export function takenCap() {
  try { return checkedCap(); } catch (err) { return undefined; }
}

// The slider spans the caps that change the answer: from the least upper end (below it no mode
// qualifies) to the largest upper end of any mode or preset (every one qualifies), as modes are judged
// by the upper ends of their intervals; a power cap goes no higher than the device's maximum, which the
// API refuses to exceed. [lo, hi] in the cap's unit.
function capSpan(kind, data) {
  const power = kind === "max_power_w";
  let [lo, hi] = power ? [data.powerLeast, data.powerTop] : [data.timeLeast, data.timeTop];
  for (const p of state.presets || []) {
    const top = power ? (p.avg_power_w_high ?? p.avg_power_w) : (p.epoch_time_s_high ?? p.epoch_time_s);
    if (top > hi) hi = top;
  }
  const most = power ? maxPowerW(data.device) : undefined;
  if (most !== undefined && hi > most) hi = most;
  return [Math.min(lo, hi), hi];
}

const onStep = (v) => +v.toPrecision(12);  // 0.1 x 3 as 0.3: the slider's bounds as people read them

// The power slider's step and bounds for caps spanning [lo, hi] W (`most`: the largest cap the API
// takes, or undefined; the time slider is log-scaled, timeScale). It moves in 0.5 W; the bounds are
// whole steps: the least rounded down (but at least one step, as the API takes only caps above 0), the
// top rounded up so that it lets in the largest upper end, down where that passes `most`.
export function powerSlider(lo, hi, most) {
  const step = 0.5;
  const min = Math.max(step, onStep(Math.floor(lo / step) * step));
  const top = onStep(Math.ceil(hi / step) * step);
  const max = most !== undefined && top > most ? onStep(Math.floor(most / step) * step) : top;
  return { step, min, max: Math.max(min, max) };
}

// The time slider's caps: positions 0..TIME_POSITIONS on a log scale over [min, max] (s), min the least
// upper end rounded down and max the largest rounded up (4 significant digits), so that the ends let in
// no mode and every mode.
export function timeScale(lo, hi) {
  const digits = (v, round) => { const e = Math.pow(10, Math.floor(Math.log10(v)) - 3); return onStep(round(v / e) * e); };
  const min = digits(lo, Math.floor), max = Math.max(min, digits(hi, Math.ceil));
  return { min, max, log: true };
}

// The cap at slider position `position`, and the position of cap `v` (clamped to the slider's ends).
function capAt(scale, position) {
  if (!scale.log) return position;
  if (position <= 0 || scale.max <= scale.min) return scale.min;
  if (position >= TIME_POSITIONS) return scale.max;
  return +(scale.min * Math.pow(scale.max / scale.min, position / TIME_POSITIONS)).toPrecision(4);
}
function positionOf(scale, v) {
  if (!scale.log) return Math.min(Math.max(v, scale.min), scale.max);
  if (scale.max <= scale.min) return 0;
  const at = Math.round(TIME_POSITIONS * Math.log(v / scale.min) / Math.log(scale.max / scale.min));
  return Math.min(Math.max(at, 0), TIME_POSITIONS);
}

// Bounds changed (device, workload, coverage or cap kind): the slider spans the caps that matter; the
// cap itself is the user's (state.caps, where it holds: capPlace), never moved onto a slider step, and only
// brought within what the API takes for this device, saying so.
export function setupCap() {
  const kind = $("cap-kind").value;
  const slider = $("cap"), box = $("cap-number");
  const data = state.data;
  syncDisabled();
  if (!data || kind === "none") { state.capScale = null; showCap(); return; }
  const [lo, hi] = capSpan(kind, data);
  const power = kind === "max_power_w";
  let scale;
  if (power) {
    const { step, min, max } = powerSlider(lo, hi, maxPowerW(data.device));
    scale = { min, max, log: false };
    Object.assign(slider, { min: String(min), max: String(max), step: String(step) });
  } else {
    scale = timeScale(lo, hi);
    Object.assign(slider, { min: "0", max: String(TIME_POSITIONS), step: "1" });
  }
  state.capScale = scale;
  slider.dataset.lo = String(scale.min);  // the caps at the slider's ends
  slider.dataset.hi = String(scale.max);
  const [least, most, above] = capAllowed(kind);
  box.min = above ? "" : String(least);
  box.max = Number.isFinite(most) ? String(most) : "";
  // The cap the page's link names, for the first load that sets up a cap (for its device and workload).
  if (state.linkCap) {
    if (state.linkCap.kind === kind) state.caps.set(capPlace(kind, data.key), state.linkCap.value);
    state.linkCap = null;
  }
  // 15 W at first, or the top of the slider where that is lower (the same modes qualify under both); a
  // time cap at the middle of its slider.
  const wish = state.caps.get(capPlace(kind, data.key)) ?? (power ? Math.min(Math.max(15, scale.min), scale.max)
    : capAt(scale, TIME_POSITIONS / 2));
  const cap = Math.min(Math.max(wish, above ? wish : least), most);
  $("cap-note").textContent = cap === wish ? "" : `${power ? "power" : "time"} cap ${fmt(wish)} ` +
    `${power ? "W" : "s"} lowered to ${fmt(cap)} ${power ? "W" : "s"}, the most the service takes for ` +
    `${deviceName(data.device)}`;
  box.value = String(cap);
  slider.value = String(positionOf(scale, cap));
  showCap();
}

// Where a cap of `kind` chosen for `key` (dataKey) holds: a power cap (a supply's budget) on every device
// and workload; a time cap (s per epoch) only for its device and workload, as another's epochs differ.
const capPlace = (kind, key) => (kind === "max_power_w" ? kind
  : JSON.stringify([kind, key.device, key.workload]));

// The cap the user chose of the kind chosen, where it holds now (undefined: none chosen, the default shown;
// null: no cap). A power cap is the one chosen, also where a device takes less and the box shows it lowered.
export function chosenCap() {
  const kind = $("cap-kind").value;
  return kind === "none" ? null : state.caps.get(capPlace(kind, dataKey()));
}

export function onCapSlider() {
  const scale = state.capScale;
  if (!scale) return;
  const cap = capAt(scale, +$("cap").value);
  $("cap-number").value = String(cap);
  state.caps.set(capPlace($("cap-kind").value, dataKey()), cap);
  $("cap-note").textContent = "";
  scheduleRecommend();
}

export function onCapNumber() {
  // only a cap the API takes is kept: one refused (15000, a slip for 15 W) must not follow to other devices
  const cap = takenCap();
  if (typeof cap === "number") {
    state.caps.set(capPlace($("cap-kind").value, dataKey()), cap);
    if (state.capScale) $("cap").value = String(positionOf(state.capScale, cap));
  }
  $("cap-note").textContent = "";
  scheduleRecommend();
}

// The cap in words, on screen and for assistive technology (the slider's own name and value text).
export function showCap() {
  const kind = $("cap-kind").value;
  const v = capValue();
  const power = kind === "max_power_w";
  const unit = power ? "W" : "s";
  const valid = v === null || takenCap() !== undefined;  // a cap the API refuses is no cap shown as held
  const said = v === null ? "no cap" : (valid ? `≤ ${fmt(v)} ${unit}` : "no valid cap");
  $("cap-value").textContent = said;
  const name = v === null ? "cap (none chosen)" : (power ? "power cap" : "time cap");
  $("cap").setAttribute("aria-label", name);
  $("cap").setAttribute("aria-valuetext",
    v === null ? "no cap" : (valid ? `${name} ${v} ${unit}` : `${name}: ${said}`));
  $("cap-number").setAttribute("aria-label", v === null ? "cap (none chosen)" : `${name} in ${unit}, exact`);
}

// Caps hold for the upper end of each interval (as POST /v1/recommendations applies them).
export function meetsCap(power, powerHigh, time, timeHigh) {
  const kind = $("cap-kind").value, cap = capValue();
  if (cap === null) return true;
  const v = kind === "max_power_w" ? (Number.isNaN(powerHigh) ? power : powerHigh)
    : (Number.isNaN(timeHigh) ? time : timeHigh);
  return v <= cap;
}

export function markFeasible() {
  const data = state.data;
  const c = data.columns;
  const ph = c.avg_power_w_high || c.avg_power_w, th = c.epoch_time_s_high || c.epoch_time_s;
  for (let i = 0; i < data.n; i++) {
    data.feasible[i] = meetsCap(c.avg_power_w[i], ph[i], c.epoch_time_s[i], th[i]) ? 1 : 0;
  }
}
