// The clock heat map: energy per epoch by GPU and memory clock for one core count and CPU clock.

import { chartSize, describeCharts } from "./chart.js";
import { fmt } from "./format.js";
import { $, state } from "./state.js";

export function fillHeatmapSelectors() {
  const steps = state.data.steps;
  $("hm-cores").replaceChildren(...steps.cores.map((v) => new Option(String(v), String(v))));
  $("hm-cpu").replaceChildren(...steps.cpu.map((v) => new Option(fmt(v, 5), String(v))));
  $("hm-cores").value = String(steps.cores[steps.cores.length - 1]);
  $("hm-cpu").value = String(steps.cpu[steps.cpu.length - 1]);
  $("hm-cores").dataset.auto = $("hm-cpu").dataset.auto = "1";
}

// viridis (5 stops, linear in between): low energy dark, high energy light
const STOPS = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
function colour(f) {
  const x = Math.min(1, Math.max(0, f)) * (STOPS.length - 1);
  const i = Math.min(STOPS.length - 2, Math.floor(x)), t = x - i;
  const a = STOPS[i], b = STOPS[i + 1];
  return `rgb(${a.map((v, k) => Math.round(v + (b[k] - v) * t)).join(",")})`;
}

export function drawHeatmap() {
  const data = state.data;
  if (!data) return;
  const best = state.rec && state.rec.best;
  if (best && $("hm-cores").dataset.auto === "1") {
    $("hm-cores").value = String(best.cpu_cores);
    $("hm-cpu").value = String(best.cpu_mhz);
  }
  const cores = +$("hm-cores").value, cpu = +$("hm-cpu").value;
  const canvas = $("heatmap");
  const ratio = window.devicePixelRatio || 1;
  const cssW = Math.min(560, chartSize().width), cssH = Math.round(cssW * 380 / 560);
  canvas.width = cssW * ratio;
  canvas.height = cssH * ratio;
  canvas.style.width = `${cssW}px`;
  canvas.style.height = `${cssH}px`;
  const ctx = canvas.getContext("2d");
  ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  ctx.clearRect(0, 0, cssW, cssH);
  const m = { left: 64, right: 10, top: 8, bottom: 46 };
  const gpu = data.steps.gpu, emc = data.steps.emc;
  const cw = (cssW - m.left - m.right) / gpu.length, ch = (cssH - m.top - m.bottom) / emc.length;
  const cellX = (g) => m.left + gpu.indexOf(g) * cw;
  const cellY = (e) => cssH - m.bottom - (emc.indexOf(e) + 1) * ch;
  const indices = data.slices.get(`${cores}|${cpu}`) || [];
  const e = data.columns.epoch_energy_j, c = data.columns;
  let lo = Infinity, hi = -Infinity, extrapolated = 0;
  for (const i of indices) { if (e[i] < lo) lo = e[i]; if (e[i] > hi) hi = e[i]; }
  for (const i of indices) {
    const x = cellX(c.gpu_mhz[i]), y = cellY(c.emc_mhz[i]);
    ctx.fillStyle = colour(hi > lo ? (e[i] - lo) / (hi - lo) : 0.5);
    ctx.fillRect(x, y, Math.ceil(cw), Math.ceil(ch));
    if (data.extrapolated[i]) {  // hatched: a clock outside the profiled range
      extrapolated++;
      ctx.save();
      ctx.beginPath();
      ctx.rect(x, y, cw, ch);
      ctx.clip();
      ctx.strokeStyle = "rgba(255, 255, 255, 0.45)";
      ctx.lineWidth = 1;
      ctx.beginPath();
      for (let d = -ch; d < cw; d += 6) { ctx.moveTo(x + d, y + ch); ctx.lineTo(x + d + ch, y); }
      ctx.stroke();
      ctx.restore();
    }
  }
  let presetsHere = 0;
  for (const p of state.presets || []) {
    if (p.cpu_cores !== cores || p.cpu_mhz !== cpu || gpu.indexOf(p.gpu_mhz) < 0 || emc.indexOf(p.emc_mhz) < 0) continue;
    presetsHere++;
    const x = cellX(p.gpu_mhz) + cw / 2, y = cellY(p.emc_mhz) + ch / 2, r = Math.min(cw, ch) / 2 - 2;
    ctx.beginPath();
    ctx.moveTo(x, y - r); ctx.lineTo(x + r, y); ctx.lineTo(x, y + r); ctx.lineTo(x - r, y); ctx.closePath();
    ctx.fillStyle = "#2e7d32";
    ctx.strokeStyle = "#fff";
    ctx.fill();
    ctx.stroke();
  }
  if (best && best.cpu_cores === cores && best.cpu_mhz === cpu && gpu.indexOf(best.gpu_mhz) >= 0 &&
      emc.indexOf(best.emc_mhz) >= 0) {
    ctx.strokeStyle = "#d1495b";
    ctx.lineWidth = 3;
    ctx.strokeRect(cellX(best.gpu_mhz) + 1.5, cellY(best.emc_mhz) + 1.5, cw - 3, ch - 3);
  }
  ctx.fillStyle = "#333";
  ctx.font = "11px system-ui, sans-serif";
  ctx.textAlign = "center";
  const every = Math.max(1, Math.ceil(40 / cw));
  gpu.forEach((v, k) => { if (k % every === 0) ctx.fillText(fmt(v, 4), m.left + (k + 0.5) * cw, cssH - m.bottom + 14); });
  ctx.fillText("GPU clock (MHz)", m.left + (cssW - m.left - m.right) / 2, cssH - 8);
  ctx.textAlign = "right";
  const everyY = Math.max(1, Math.ceil(14 / ch));
  emc.forEach((v, k) => { if (k % everyY === 0) ctx.fillText(fmt(v, 4), m.left - 4, cssH - m.bottom - (k + 0.5) * ch + 4); });
  ctx.save();
  ctx.translate(12, m.top + (cssH - m.top - m.bottom) / 2);
  ctx.rotate(-Math.PI / 2);
  ctx.textAlign = "center";
  ctx.fillText("memory clock (MHz)", 0, 0);
  ctx.restore();
  canvas.dataset.device = data.device;
  $("hm-legend").textContent = indices.length
    ? `${indices.length} modes (${extrapolated} extrapolated${presetsHere ? `, ${presetsHere} preset` : ""}); ` +
      `energy ${fmt(lo)} J (dark) to ${fmt(hi)} J (light) per epoch`
    : "no modes with these cores and CPU clock";
  describeCharts();
}
