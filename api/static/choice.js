// The answer shown: the chosen mode and its command, the presets under the same cap compared, and the
// Pareto front within the cap as a table.

import { meetsCap } from "./cap.js";
import { fmt, interval, percent } from "./format.js";
import { showProvenance } from "./provenance.js";
import { $, state } from "./state.js";

function totalRows(row, epochs) {
  if (epochs === null || !state.totals) return [];
  const out = [];
  const { time, energy } = state.totals;
  if (!time && !energy) {  // the document names no total: the per-epoch figures times the epochs, no interval
    return [[`${epochs.toLocaleString("en")} epochs`, `≈ ${fmt(row.epoch_time_s * epochs)} s`],
      [`energy for ${epochs.toLocaleString("en")}`, `≈ ${fmt(row.epoch_energy_j * epochs)} J`]];
  }
  if (time && row[time] !== undefined) {
    out.push([`${epochs.toLocaleString("en")} epochs`, interval(row[time], row[`${time}_low`], row[`${time}_high`], "s")]);
  }
  if (energy && row[energy] !== undefined) {
    out.push([`energy for ${epochs.toLocaleString("en")}`,
      interval(row[energy], row[`${energy}_low`], row[`${energy}_high`], "J")]);
  }
  return out;
}

export function showChoice(rec, key) {
  const best = rec.best;
  const box = $("best");
  if (!best) {
    box.textContent = rec.reason || "no mode meets the cap";
    box.dataset.mode = "";
    $("command").textContent = "–";
    $("command").dataset.mode = "";
  } else {
    box.dataset.mode = best.mode;
    const rows = [
      ["cores online", best.cpu_cores], ["CPU", `${fmt(best.cpu_mhz)} MHz`], ["GPU", `${fmt(best.gpu_mhz)} MHz`],
      ["memory (EMC)", `${fmt(best.emc_mhz)} MHz`],
      ["epoch time", interval(best.epoch_time_s, best.epoch_time_s_low, best.epoch_time_s_high, "s")],
      ["mean power", interval(best.avg_power_w, best.avg_power_w_low, best.avg_power_w_high, "W")],
      ["energy", interval(best.epoch_energy_j, best.epoch_energy_j_low, best.epoch_energy_j_high, "J")],
      ...totalRows(best, key.epochs),
      ["extrapolated", best.extrapolated
        ? `yes: ${(best.extrapolated_knobs || "").split(";").filter(Boolean).join(", ")} outside the profiled range`
        : "no: every clock within the profiled range"],
    ];
    const label = document.createElement("div");
    label.className = "label";
    label.textContent = best.mode;
    label.dataset.mode = best.mode;
    if (best.extrapolated) label.classList.add("extrapolated");
    const table = document.createElement("table");
    for (const [k, v] of rows) {
      const tr = table.insertRow();
      tr.insertCell().textContent = k;
      const td = tr.insertCell();
      td.className = "num";
      td.textContent = String(v);
    }
    box.replaceChildren(label, table);
    $("command").textContent = `sudo jetpredict apply --mode ${best.mode}`;
    $("command").dataset.mode = best.mode;
  }
  showProvenance(rec, best);
  // Why the chosen mode may look beaten by other plotted modes, off the front (as the CLI notes it).
  const note = rec.preferred_preset
    ? "Note: a better-looking mode outside the profiled knob ranges gave way to the best nvpmodel preset " +
      "within the cap, itself outside them but better than every mode inside them beyond its interval."
    : rec.preferred_in_range
      ? "Note: a mode outside the profiled knob ranges looked better, but not beyond its interval; the best " +
        "mode inside the ranges, or better than all of them beyond its interval, was chosen."
      : "";
  $("best-note").textContent = note;
  $("best-note").hidden = !note;
}

// The presets under the same cap (upper ends of their intervals, as for every mode), and the service's
// comparison of the chosen mode with the best of them (POST /v1/recommendations: preset_comparison).
export function showPresets(rec) {
  const body = $("presets").tBodies[0];
  const presets = state.presets || [];
  const cmp = rec.preset_comparison;
  // The upper end that the cap is checked against: of the epoch time under a time cap, else of the power.
  const time = $("cap-kind").value === "max_epoch_time_s";
  $("presets-top").textContent = time ? "time ≤" : "power ≤";
  body.replaceChildren(...presets.map((p) => {
    const ok = meetsCap(p.avg_power_w, p.avg_power_w_high ?? NaN, p.epoch_time_s, p.epoch_time_s_high ?? NaN);
    const tr = document.createElement("tr");
    tr.dataset.mode = p.mode;
    if (!ok) tr.classList.add("over");
    if (p.extrapolated) tr.classList.add("extrapolated");
    if (cmp && cmp.preset === p.mode) tr.classList.add("compared");
    const cells = [p.mode + (p.extrapolated ? " *" : ""), ok ? "yes" : "no", `${fmt(p.epoch_time_s)} s`,
      `${fmt(p.epoch_energy_j)} J`, time ? `${fmt(p.epoch_time_s_high ?? p.epoch_time_s, 4)} s`
        : `${fmt(p.avg_power_w_high ?? p.avg_power_w, 3)} W`];
    for (const text of cells) tr.insertCell().textContent = text;
    return tr;
  }));
  let text = presets.some((p) => p.extrapolated) ? "* extrapolated: a clock outside the profiled range. " : "";
  const saved = (amount, share, unit, more, less) => (amount >= 0
    ? `${fmt(amount, 3)} ${unit} (${percent(share)}) ${less}` : `${fmt(-amount, 3)} ${unit} (${percent(-share)}) ${more}`);
  if (state.presetsError) {
    text += `Presets unavailable: ${state.presetsError}`;
  } else if (!cmp) {
    text += "This answer compares with no preset.";
  } else if (cmp.preset === null) {
    text += `No preset meets the cap${cmp.reason ? `: ${cmp.reason}` : ""}.`;
  } else if (cmp.chosen_is_preset) {
    text += `The chosen mode is the preset ${cmp.preset}: no custom mode beats it under this cap.`;
  } else if (rec.best) {
    text += `Against ${cmp.preset}, the best preset within the cap (${fmt(cmp.epoch_time_s)} s, ` +
      `${fmt(cmp.epoch_energy_j)} J per epoch), the chosen mode takes ` +
      `${saved(cmp.time_saving_s, cmp.time_saving_share, "s", "more", "less")} per epoch and uses ` +
      `${saved(cmp.energy_saving_j, cmp.energy_saving_share, "J", "more", "less")}.`;
  }
  $("preset-compare").textContent = text;
}

// The front within the cap as a table: each mode's intervals within reach of the keyboard and a screen
// reader, as the chart's hover gives them to a mouse.
export function showFront(rec) {
  const rows = rec.pareto.map((r) => {
    const tr = document.createElement("tr");
    tr.dataset.mode = r.mode;
    if (rec.best && rec.best.mode === r.mode) tr.classList.add("chosen");
    const cells = [r.mode + (r.extrapolated ? " *" : ""),
      interval(r.epoch_time_s, r.epoch_time_s_low, r.epoch_time_s_high, ""),
      interval(r.avg_power_w, r.avg_power_w_low, r.avg_power_w_high, ""),
      interval(r.epoch_energy_j, r.epoch_energy_j_low, r.epoch_energy_j_high, "")];
    for (const text of cells) tr.insertCell().textContent = text.replace(/ +\[/, " [").trim();
    return tr;
  });
  $("front").tBodies[0].replaceChildren(...rows);
}
