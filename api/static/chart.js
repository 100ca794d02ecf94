// The Pareto chart: uPlot draws the axes and the front, the page draws every mode's point on its canvas
// (typed arrays: 29,232 modes on AGX Xavier). Also the charts' size and their text alternatives.

import { markFeasible } from "./cap.js";
import { deviceName } from "./devices.js";
import { fmt, interval } from "./format.js";
import { drawHeatmap } from "./heatmap.js";
import { $, state } from "./state.js";

function paretoSeries() {
  const rec = state.rec;
  if (!rec || !rec.pareto.length) return [[], []];
  const front = rec.pareto.slice().sort((a, b) => a.epoch_time_s - b.epoch_time_s);
  return [front.map((r) => r.epoch_time_s), front.map((r) => r.epoch_energy_j)];
}

// Point colours: within the cap and inside the profiled ranges; within the cap but extrapolated; over it.
const CLOUD = ["rgba(120, 120, 120, 0.12)", "rgba(11, 107, 203, 0.22)", "rgba(230, 126, 34, 0.32)"];

function drawCloud(u) {
  const data = state.data;
  if (!data) return;
  const { left, top, width, height } = u.bbox;
  const ctx = u.ctx;
  const ratio = uPlot.pxRatio;
  const t = data.columns.epoch_time_s, e = data.columns.epoch_energy_j;
  const [x0, x1] = data.xScale, [y0, y1] = data.yScale;
  const lx0 = Math.log10(x0), sx = width / (Math.log10(x1) - lx0);
  const ly0 = Math.log10(y0), sy = height / (Math.log10(y1) - ly0);
  const size = 2 * ratio, half = size / 2;
  ctx.save();
  ctx.beginPath();
  ctx.rect(left, top, width, height);
  ctx.clip();
  for (const pass of [0, 1, 2]) {
    ctx.beginPath();
    for (let i = 0; i < data.n; i++) {
      const x = left + (Math.log10(t[i]) - lx0) * sx;
      const y = top + height - (Math.log10(e[i]) - ly0) * sy;
      if (pass === 0) { data.px[i] = (x - left) / ratio; data.py[i] = (y - top) / ratio; }
      const group = data.feasible[i] ? 1 + data.extrapolated[i] : 0;
      if (group === pass) ctx.rect(x - half, y - half, size, size);
    }
    ctx.fillStyle = CLOUD[pass];
    ctx.fill();
  }
  ctx.restore();
}

function drawMarks(u) {
  const ctx = u.ctx, ratio = uPlot.pxRatio;
  ctx.save();
  // presets: diamonds with their names (a name that would overlap one already written is left to the table)
  ctx.font = `${11 * ratio}px system-ui, sans-serif`;
  const written = [];
  for (const p of state.presets || []) {
    const x = u.valToPos(p.epoch_time_s, "x", true), y = u.valToPos(p.epoch_energy_j, "y", true);
    const r = 5 * ratio;
    ctx.beginPath();
    ctx.moveTo(x, y - r); ctx.lineTo(x + r, y); ctx.lineTo(x, y + r); ctx.lineTo(x - r, y); ctx.closePath();
    ctx.fillStyle = p.extrapolated ? "#e67e22" : "#2e7d32";
    ctx.strokeStyle = "#fff";
    ctx.lineWidth = ratio;
    ctx.fill();
    ctx.stroke();
    const tx = x + r + 2 * ratio, ty = y - r, tw = ctx.measureText(p.mode).width, th = 12 * ratio;
    if (written.some(([ax, ay, aw]) => tx < ax + aw && ax < tx + tw && Math.abs(ty - ay) < th)) continue;
    written.push([tx, ty, tw]);
    ctx.fillStyle = "#1d2330";
    ctx.fillText(p.mode, tx, ty);
  }
  const best = state.rec && state.rec.best;
  if (best) {
    const x = u.valToPos(best.epoch_time_s, "x", true), y = u.valToPos(best.epoch_energy_j, "y", true);
    ctx.lineWidth = 2.5 * ratio;
    ctx.strokeStyle = "#111";
    ctx.beginPath();
    ctx.arc(x, y, 7 * ratio, 0, 2 * Math.PI);
    ctx.stroke();
  }
  ctx.restore();
}

function onCursor(u) {
  const tip = $("tooltip");
  const data = state.data;
  const { left, top } = u.cursor;
  if (!data || left === undefined || left < 0 || top < 0) { tip.hidden = true; return; }
  let best = -1, bestD = 64; // within 8 CSS px
  for (let i = 0; i < data.n; i++) {
    const dx = data.px[i] - left, dy = data.py[i] - top;
    const d = dx * dx + dy * dy;
    if (d < bestD) { bestD = d; best = i; }
  }
  if (best < 0) { tip.hidden = true; return; }
  tip.textContent = describeMode(best);
  tip.dataset.mode = data.labels[best];
  tip.hidden = false;
  const over = u.over;
  tip.style.left = `${over.offsetLeft + Math.max(0, Math.min(left + 14, over.clientWidth - tip.offsetWidth))}px`;
  tip.style.top = `${over.offsetTop + top + 14}px`;
}

function describeMode(i) {
  const data = state.data, c = data.columns;
  const notes = [data.feasible[i] ? "" : "over the cap",
    data.extrapolated[i] ? `extrapolated: ${(data.knobs[i] || "").split(";").join(", ")}` : ""].filter(Boolean);
  return `${data.labels[i]}${notes.length ? `  (${notes.join("; ")})` : ""}\n` +
    `${c.cpu_cores[i]} cores, CPU ${fmt(c.cpu_mhz[i])}, GPU ${fmt(c.gpu_mhz[i])}, EMC ${fmt(c.emc_mhz[i])} MHz\n` +
    `time   ${interval(c.epoch_time_s[i], c.epoch_time_s_low[i], c.epoch_time_s_high[i], "s")}\n` +
    `power  ${c.avg_power_w_low ? interval(c.avg_power_w[i], c.avg_power_w_low[i], c.avg_power_w_high[i], "W")
      : `${fmt(c.avg_power_w[i], 3)} W`}\n` +
    `energy ${interval(c.epoch_energy_j[i], c.epoch_energy_j_low[i], c.epoch_energy_j_high[i], "J")}`;
}

// Ticks at 1, 2, 5 x 10^k (and 1.5, 3, 7 when the range is narrow) inside [min, max] of a log axis.
function logSplits(u, axis, min, max) {
  for (const mantissas of [[1, 2, 5], [1, 1.5, 2, 3, 5, 7], [1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 7, 8, 9]]) {
    const ticks = [];
    for (let k = Math.floor(Math.log10(min)); k <= Math.ceil(Math.log10(max)); k++) {
      for (const m of mantissas) {
        const v = m * Math.pow(10, k);
        if (v >= min && v <= max) ticks.push(v);
      }
    }
    if (ticks.length >= 4) return ticks;
  }
  return [min, max];
}

// uPlot labels only some ticks of a log axis by default; logSplits already chose legible ones.
function allTicks(u, ticks) {
  return ticks;
}

function tickValues(u, ticks) {
  return ticks.map((v) => (v === null || v === undefined ? "" : fmt(v, 3)));
}

export function drawPareto(rebuild) {
  const data = state.data;
  if (!data) return;
  if (rebuild || !state.chart) {
    if (state.chart) state.chart.destroy();
    const pad = (lo, hi) => [lo / Math.pow(hi / lo, 0.03), hi * Math.pow(hi / lo, 0.03)];
    const times = [...data.timeRange], energies = [...data.energyRange];
    for (const p of state.presets || []) {  // presets on the chart even when outside the custom space
      times.push(p.epoch_time_s);
      energies.push(p.epoch_energy_j);
    }
    data.xScale = pad(Math.min(...times), Math.max(...times));
    data.yScale = pad(Math.min(...energies), Math.max(...energies));
    markFeasible();
    const { width, height } = chartSize();
    state.chart = new uPlot({
      width, height,
      scales: {
        x: { time: false, distr: 3, log: 10, range: () => data.xScale },
        y: { distr: 3, log: 10, range: () => data.yScale },
      },
      axes: [
        { label: "epoch time (s)", size: 44, splits: logSplits, values: tickValues, filter: allTicks },
        { label: "energy per epoch (J)", size: 64, splits: logSplits, values: tickValues, filter: allTicks },
      ],
      series: [{}, {
        label: "Pareto front", stroke: "#d1495b", width: 2,
        points: { show: true, size: 6, fill: "#d1495b", stroke: "#d1495b" },
      }],
      legend: { show: false },
      cursor: { points: { show: false }, drag: { x: false, y: false } },
      hooks: { drawAxes: [drawCloud], draw: [drawMarks], setCursor: [onCursor] },
    }, paretoSeries(), $("pareto"));
  } else {
    state.chart.setData(paretoSeries());  // the scales' range functions keep the axes fixed
  }
  $("pareto").dataset.device = data.device;
  describeCharts();
}

// The charts' size in CSS px, from the width their figure has (narrow windows: one column, smaller charts).
export function chartSize() {
  const inner = $("pareto").parentElement.clientWidth - 18;  // the figure's padding and border
  const width = Math.round(Math.max(220, Math.min(640, inner)));
  return { width, height: Math.round(Math.min(380, Math.max(240, width * 0.68))) };
}

// A window that changes width resizes the charts to their figures (after the resizing settles).
export function onResize() {
  clearTimeout(state.resizeTimer);
  state.resizeTimer = setTimeout(() => {
    if (!state.data) return;
    const { width, height } = chartSize();
    if (state.chart && (state.chart.width !== width || state.chart.height !== height)) {
      state.chart.setSize({ width, height });
    }
    drawHeatmap();
  }, 150);
}

// The charts are canvases: their text alternatives (aria-label of role="img") say in a sentence what
// they show, and follow every answer drawn.
export function describeCharts() {
  const data = state.data;
  if (!data) {
    $("pareto").setAttribute("aria-label", "Chart of epoch time against energy: no modes loaded");
    $("heatmap").setAttribute("aria-label", "Heat map of energy by GPU and memory clock: no modes loaded");
    return;
  }
  let within = 0;
  for (let i = 0; i < data.n; i++) within += data.feasible[i];
  const best = state.rec && state.rec.best;
  const name = deviceName(data.device);
  $("pareto").setAttribute("aria-label", `Chart of epoch time against energy per epoch for ` +
    `${data.n.toLocaleString("en")} modes of ${name}: ${fmt(data.timeRange[0])} to ${fmt(data.timeRange[1])} s, ` +
    `${fmt(data.energyRange[0])} to ${fmt(data.energyRange[1])} J; ${within.toLocaleString("en")} within the cap` +
    (state.rec ? `; ${state.rec.pareto.length} on the Pareto front` : "") +
    (best ? `; chosen mode ${best.mode}: ${fmt(best.epoch_time_s)} s, ${fmt(best.epoch_energy_j)} J` : ""));
  $("heatmap").setAttribute("aria-label", `Heat map of energy per epoch by GPU and memory clock for ${name}, ` +
    `${$("hm-cores").value} cores at CPU ${fmt(+$("hm-cpu").value, 5)} MHz: ${$("hm-legend").textContent}`);
}
