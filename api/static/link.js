// The notes on what the page's link (?device=, ?workload=) asked for and did not find.

import { $, state } from "./state.js";

// The notes on what the page's link asked for and did not find; gone once the user chooses otherwise.
export function showLinkNote() {
  const text = [state.linkNotes.device, state.linkNotes.workload].filter(Boolean).join(" ");
  $("link-note").textContent = text;
  $("link-note").hidden = !text;
}

export function clearLinkNote() {
  state.linkNotes = { device: "", workload: "" };
  showLinkNote();
}
