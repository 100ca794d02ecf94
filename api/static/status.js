// What the page says about its own state: the status line and document.body.dataset.state, the progress
// bar, which controls wait for the device being loaded, the "updating…" badge and "Copy command".

import { $, state } from "./state.js";

export const STEPS = 4;  // progress: workloads, rows, all-mode predictions, recommendation

// Controls whose meaning depends on the device being loaded: disabled until its answer is on screen.
// ("Copy command" too, but it also waits for a current answer with a best mode: syncCopy.)
const DEVICE_BOUND = ["workload", "workload-search", "cap", "cap-number", "confidence", "hm-cores", "hm-cpu"];

export function setState(kind, message) {
  document.body.dataset.state = kind;
  if (message !== undefined) $("status").textContent = message;
  // A stale answer is "updating…" only while a new one is on its way; after an error none is coming.
  $("stale-badge").textContent = kind === "error" ? "out of date" : "updating…";
}

export function setBusy(busy) {
  state.loading = busy;
  syncDisabled();
  syncCopy();
  $("progress").hidden = !busy;
  document.querySelector("main").setAttribute("aria-busy", busy ? "true" : "false");
}

// The controls that wait for the device's answer are disabled, except the focused one: disabling it would
// drop the keyboard's focus to the page. That one is aria-disabled and holds its value (holdWhileBusy).
export function syncDisabled() {
  const focused = document.activeElement;
  const noCap = $("cap-kind").value === "none" || !state.data;
  for (const id of DEVICE_BOUND) {
    const el = $(id);
    const off = state.loading || ((id === "cap" || id === "cap-number") && noCap);
    const hold = off && el === focused && !el.disabled;
    el.disabled = off && !hold;
    if (hold) {
      el.setAttribute("aria-disabled", "true");
      el.dataset.held = el.value;
    } else if (!off) {
      el.removeAttribute("aria-disabled");
      delete el.dataset.held;
    }
  }
}

// A change of an aria-disabled control (focused when its device began loading) is undone and goes no
// further: it would ask about the device that is not loaded yet. Runs before the controls' own handlers.
export function holdWhileBusy(event) {
  const el = event.target;
  if (!(el instanceof HTMLElement) || el.getAttribute("aria-disabled") !== "true") return;
  event.stopImmediatePropagation();
  if (el.dataset.held !== undefined && el.value !== el.dataset.held) el.value = el.dataset.held;
}

export function progress(gen, step, message) {
  if (gen !== state.gen) return;
  $("progress").value = step;
  setState("loading", `${message} (step ${step + 1} of ${STEPS})`);
}

// The shown answer no longer answers the controls: say so until the new one arrives.
export function markStale() {
  if (!state.rec) return;
  $("choice").classList.add("stale");
  $("stale-badge").hidden = false;
  syncCopy();
}

// "Copy command" copies only a command that answers the controls: nothing loading, a best mode shown,
// and that answer not stale (a later change, a bad epochs value or a failed request left it behind).
function syncCopy() {
  $("copy").disabled = state.loading || !state.rec || !state.rec.best || !$("command").dataset.mode ||
    $("choice").classList.contains("stale");
}
