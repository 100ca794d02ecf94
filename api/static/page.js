// jetpredict mode chooser. Reads only the public HTTP API; draws every mode of a device on canvas from
// typed arrays (29,232 modes on AGX Xavier), so the page stays responsive.
//
// Flow: device + workload -> POST /v1/predictions (modes "all", CSV) once -> typed arrays -> charts;
// objective + cap -> POST /v1/recommendations (debounced) -> chosen mode, Pareto front, command.
// document.body.dataset.state is "loading" | "ready" | "error" (the browser test and the benchmark wait
// on it); document.body.dataset.renderMs is the time to draw all modes once the data are parsed, paintMs
// the same until the frame holding them is on screen (parseMs: CSV to typed arrays, fetchMs: the API call, redrawMs: a cap change, readyMs: since navigation).
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);
  const NUMERIC = ["cpu_cores", "cpu_mhz", "gpu_mhz", "emc_mhz", "epoch_time_s", "epoch_time_s_low",
    "epoch_time_s_high", "avg_power_w", "avg_power_w_low", "avg_power_w_high", "epoch_energy_j",
    "epoch_energy_j_low", "epoch_energy_j_high"];
  const SOURCE_TEXT = {
    published: "published measurements (POMACS 2022)",
    measured: "measured sweeps",
    simulated: "digital twin (simulated)",
  };
  const state = {
    devices: [], builtins: {}, rowsCache: new Map(), data: null, rec: null, chart: null,
    loadSeq: 0, recSeq: 0, recTimer: 0, workloadRef: null, workloadInfo: null,
  };

  // ---- HTTP ----------------------------------------------------------------------------------------
  async function api(path, options) {
    const response = await fetch(path, options);
    const type = response.headers.get("Content-Type") || "";
    const body = type.includes("json") ? await response.json() : await response.text();
    if (!response.ok) {
      let message = `${response.status} ${path}`;
      if (body && body.message) {
        message = body.message;
        const fields = Object.entries(body.errors || {}).slice(0, 4)
          .map(([k, v]) => `${k}: ${[].concat(v).join("; ")}`);
        if (fields.length) message += ` (${fields.join(" | ")})`;
      }
      const err = new Error(message);
      err.status = response.status;
      throw err;
    }
    return body;
  }

  function postJson(path, payload, accept, headers) {
    return api(path, {
      method: "POST",
      headers: Object.assign({ "Content-Type": "application/json", Accept: accept || "application/json" },
        headers || {}),
      body: JSON.stringify(payload),
    });
  }

  function setState(kind, message) {
    document.body.dataset.state = kind;
    if (message !== undefined) $("status").textContent = message;
  }

  // ---- CSV --------------------------------------------------------------------------------------------
  // One line of RFC 4180 CSV (quotes, doubled quotes) into cells.
  function splitQuoted(line) {
    const cells = [];
    let cell = "", quoted = false;
    for (let i = 0; i < line.length; i++) {
      const c = line[i];
      if (quoted) {
        if (c === '"' && line[i + 1] === '"') { cell += '"'; i++; }
        else if (c === '"') quoted = false;
        else cell += c;
      } else if (c === '"') quoted = true;
      else if (c === ",") { cells.push(cell); cell = ""; }
      else cell += c;
    }
    cells.push(cell);
    return cells;
  }

  function csvLines(text) {
    return text.split(/\r?\n/).filter((line) => line.length > 0);
  }

  function splitLine(line) {
    return line.indexOf('"') < 0 ? line.split(",") : splitQuoted(line);
  }

  // Predictions CSV -> {n, labels, columns: {name: Float64Array}, first: {provenance cells}}.
  function parsePredictions(text) {
    const lines = csvLines(text);
    const header = splitLine(lines[0]);
    const n = lines.length - 1;
    const index = Object.fromEntries(header.map((h, i) => [h, i]));
    const columns = {};
    for (const name of NUMERIC) if (name in index) columns[name] = new Float64Array(n);
    const labels = new Array(n);
    const numeric = Object.keys(columns).map((name) => [columns[name], index[name]]);
    const modeAt = index.mode;
    for (let r = 0; r < n; r++) {
      const cells = splitLine(lines[r + 1]);
      labels[r] = cells[modeAt];
      for (const [array, at] of numeric) {
        const cell = cells[at];
        array[r] = cell === "" ? NaN : +cell;
      }
    }
    const firstCells = splitLine(lines[1]);
    const first = Object.fromEntries(header.map((h, i) => [h, firstCells[i]]));
    return { n, labels, columns, first };
  }

  // A profile CSV file -> row objects (strings; empty cell -> null), as POST /v1/profiles takes them.
  function parseProfileCsv(text) {
    const lines = csvLines(text.replace(/^\uFEFF/, ""));
    if (lines.length < 2) throw new Error("the file has no data rows");
    const header = splitQuoted(lines[0]).map((h) => h.trim());
    return lines.slice(1).map((line) => {
      const cells = splitQuoted(line);
      const row = {};
      header.forEach((h, i) => { row[h] = cells[i] === undefined || cells[i] === "" ? null : cells[i]; });
      return row;
    });
  }

  // ---- formatting -----------------------------------------------------------------------------------
  // Numbers for people: 4 significant digits, no exponent, no trailing zeros (1190.4, 6518, 0.2531).
  function fmt(v, digits) {
    if (v === null || v === undefined || Number.isNaN(+v)) return "–";
    const x = +v;
    if (Math.abs(x) >= Math.pow(10, digits || 4)) return String(Math.round(x));
    const text = x.toPrecision(digits || 4);
    return text.includes("e") ? String(x) : (text.includes(".") ? text.replace(/\.?0+$/, "") : text);
  }
  const interval = (v, lo, hi, unit) => `${fmt(v)} ${unit}` +
    (lo === null || lo === undefined || Number.isNaN(lo) ? "" : `  [${fmt(lo, 3)}, ${fmt(hi, 3)}]`);

  // ---- devices and workloads ---------------------------------------------------------------------------
  async function loadDevices() {
    const body = await api("/v1/devices");
    state.devices = body.devices;
    const select = $("device");
    select.replaceChildren(...body.devices.map((d) => new Option(`${d.name} (${d.power_modes} modes)`, d.id)));
    const wanted = new URLSearchParams(location.search).get("device");
    select.value = body.devices.some((d) => d.id === wanted) ? wanted
      : (body.devices.some((d) => d.id === "agx-xavier") ? "agx-xavier" : body.devices[0].id);
  }

  async function loadWorkloads(selectId) {
    const device = $("device").value;
    const [stored, builtin] = await Promise.all([
      api("/v1/workloads?limit=1000"),
      api(`/v1/reference-workloads?device=${encodeURIComponent(device)}`),
    ]);
    const select = $("workload");
    const groups = [];
    const own = document.createElement("optgroup");
    own.label = "stored workloads (POST /v1/profiles)";
    for (const w of stored.workloads) {
      const cross = w.device !== device ? `, profiled on ${w.device}: cross-device` : "";
      const option = new Option(`${w.id} (${w.profiled_modes} profiled modes${cross})`, `stored:${w.id}`);
      own.appendChild(option);
    }
    if (own.children.length) groups.push(own);
    const ref = document.createElement("optgroup");
    ref.label = "built-in workloads (bundled reference sweeps)";
    state.builtins = {};
    for (const w of builtin.workloads) {
      const key = `builtin:${w.source}:${w.workload}`;
      state.builtins[key] = w;
      ref.appendChild(new Option(`${w.workload} (${w.source}, ${w.modes} modes)`, key));
    }
    if (ref.children.length) groups.push(ref);
    select.replaceChildren(...groups);
    const wanted = selectId || new URLSearchParams(location.search).get("workload");
    const values = Array.from(select.options).map((o) => o.value);
    const match = values.find((v) => v === wanted || v.endsWith(`:${wanted}`));
    if (match) select.value = match;
    else if (values.length) select.value = values.find((v) => v.startsWith("builtin:")) || values[0];
  }

  async function workloadRef() {
    const value = $("workload").value;
    if (!value) throw new Error("no workload for this device yet: upload a profile CSV below");
    if (value.startsWith("stored:")) return [{ id: value.slice(7) }, { kind: "stored", id: value.slice(7) }];
    const info = state.builtins[value];
    const key = `${$("device").value}|${value}`;
    if (!state.rowsCache.has(key)) {
      const path = `/v1/reference-workloads/${encodeURIComponent(info.device)}/` +
        `${encodeURIComponent(info.workload)}?source=${encodeURIComponent(info.source)}`;
      state.rowsCache.set(key, (await api(path)).rows);
    }
    return [{ rows: state.rowsCache.get(key) }, Object.assign({ kind: "builtin" }, info)];
  }

  // ---- all modes --------------------------------------------------------------------------------------
  async function loadAll() {
    const seq = ++state.loadSeq;
    state.recSeq++;
    clearTimeout(state.recTimer);
    setState("loading", "Predicting every power mode…");
    const device = $("device").value;
    const t0 = performance.now();
    const [ref, info] = await workloadRef();
    const text = await postJson("/v1/predictions", { device, workload: ref, modes: "all" }, "text/csv");
    if (seq !== state.loadSeq) return;
    const t1 = performance.now();
    const data = parsePredictions(text);
    data.device = device;
    document.body.dataset.fetchMs = (t1 - t0).toFixed(0);
    state.data = data;
    state.workloadRef = ref;
    state.workloadInfo = info;
    indexModes(data);
    setupCap();
    fillHeatmapSelectors();
    const t2 = performance.now();
    drawPareto(true);
    drawHeatmap();
    document.body.dataset.renderMs = (performance.now() - t2).toFixed(1);
    // uPlot draws in a microtask and the browser rasterises at the next frame: time until that frame is done.
    await new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0)));
    document.body.dataset.paintMs = (performance.now() - t2).toFixed(1);
    document.body.dataset.parseMs = (t2 - t1).toFixed(1);
    document.body.dataset.modes = String(data.n);
    $("mode-count").textContent = `all ${data.n.toLocaleString("en")}`;
    await recommend();
  }

  function indexModes(data) {
    const c = data.columns;
    const unique = (a) => Array.from(new Set(a)).sort((x, y) => x - y);
    data.steps = { cores: unique(c.cpu_cores), cpu: unique(c.cpu_mhz), gpu: unique(c.gpu_mhz),
      emc: unique(c.emc_mhz) };
    const slices = new Map();
    for (let i = 0; i < data.n; i++) {
      const key = `${c.cpu_cores[i]}|${c.cpu_mhz[i]}`;
      let list = slices.get(key);
      if (!list) slices.set(key, (list = []));
      list.push(i);
    }
    data.slices = slices;
    const range = (a) => {
      let lo = Infinity, hi = -Infinity;
      for (let i = 0; i < a.length; i++) { const v = a[i]; if (v < lo) lo = v; if (v > hi) hi = v; }
      return [lo, hi];
    };
    data.timeRange = range(c.epoch_time_s);
    data.energyRange = range(c.epoch_energy_j);
    data.powerRange = range(c.avg_power_w);
    data.feasible = new Uint8Array(data.n);
    data.px = new Float32Array(data.n);
    data.py = new Float32Array(data.n);
  }

  // ---- cap slider ----------------------------------------------------------------------------------
  function setupCap() {
    const kind = $("cap-kind").value;
    const slider = $("cap");
    const data = state.data;
    slider.disabled = kind === "none" || !data;
    if (!data || kind === "none") { $("cap-value").textContent = "no cap"; return; }
    const [lo, hi] = kind === "max_power_w" ? data.powerRange : data.timeRange;
    const step = kind === "max_power_w" ? 0.5 : Math.max(0.1, +((hi - lo) / 400).toPrecision(1));
    const previous = +slider.value;
    slider.min = String(Math.floor(lo / step) * step);
    slider.max = String(Math.ceil(hi / step) * step);
    slider.step = String(step);
    const fallback = kind === "max_power_w" ? Math.min(Math.max(15, lo), hi) : (lo + hi) / 2;
    const keep = slider.dataset.kind === kind && previous >= +slider.min && previous <= +slider.max;
    slider.value = String(keep ? previous : fallback);
    slider.dataset.kind = kind;
    showCap();
  }

  function capValue() {
    const kind = $("cap-kind").value;
    return kind === "none" ? null : +$("cap").value;
  }

  function showCap() {
    const kind = $("cap-kind").value;
    const v = capValue();
    $("cap-value").textContent = v === null ? "no cap" : (kind === "max_power_w" ? `≤ ${v} W` : `≤ ${v} s`);
  }

  function markFeasible() {
    const data = state.data;
    const kind = $("cap-kind").value;
    const cap = capValue();
    // Caps hold for the upper end of each interval (as POST /v1/recommendations applies them).
    const c = data.columns;
    const values = kind === "max_power_w" ? (c.avg_power_w_high || c.avg_power_w)
      : (c.epoch_time_s_high || c.epoch_time_s);
    for (let i = 0; i < data.n; i++) data.feasible[i] = cap === null || values[i] <= cap ? 1 : 0;
  }

  // ---- recommendation ---------------------------------------------------------------------------------
  function scheduleRecommend() {
    showCap();
    clearTimeout(state.recTimer);
    state.recSeq++; // an answer to an earlier request must not mark the page ready
    setState("loading");
    state.recTimer = setTimeout(() => recommend().catch(fail), 150);
  }

  async function recommend() {
    const seq = ++state.recSeq;
    const data = state.data;
    if (!data) return;
    setState("loading", "Choosing the best mode…");
    const constraints = {};
    const cap = capValue();
    if (cap !== null) constraints[$("cap-kind").value] = cap;
    const body = { device: data.device, workload: state.workloadRef, objective: $("objective").value, constraints };
    const rec = await postJson("/v1/recommendations", body);
    if (seq !== state.recSeq || data !== state.data) return;
    state.rec = rec;
    document.body.dataset.request = JSON.stringify({ device: body.device, workload: $("workload").value,
      objective: body.objective, constraints });
    const t0 = performance.now();
    markFeasible();
    showChoice(rec);
    drawPareto(false);
    drawHeatmap();
    document.body.dataset.redrawMs = (performance.now() - t0).toFixed(1);
    document.body.dataset.readyMs = performance.now().toFixed(0);  // since navigation started
    setState("ready", rec.feasible
      ? `${data.n.toLocaleString("en")} modes predicted; ${rec.pareto.length} on the time–energy front within the cap.`
      : `No mode meets the cap: ${rec.reason}`);
  }

  function showChoice(rec) {
    const best = rec.best;
    const box = $("best");
    if (!best) {
      box.textContent = rec.reason || "no mode meets the cap";
      box.dataset.mode = "";
      $("command").textContent = "–";
    } else {
      box.dataset.mode = best.mode;
      const rows = [
        ["cores online", best.cpu_cores], ["CPU", `${fmt(best.cpu_mhz)} MHz`], ["GPU", `${fmt(best.gpu_mhz)} MHz`],
        ["memory (EMC)", `${fmt(best.emc_mhz)} MHz`],
        ["epoch time", interval(best.epoch_time_s, best.epoch_time_s_low, best.epoch_time_s_high, "s")],
        ["mean power", interval(best.avg_power_w, best.avg_power_w_low, best.avg_power_w_high, "W")],
        ["energy", interval(best.epoch_energy_j, best.epoch_energy_j_low, best.epoch_energy_j_high, "J")],
      ];
      const label = document.createElement("div");
      label.className = "label";
      label.textContent = best.mode;
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
    }
    showProvenance(rec, best);
  }

  function showProvenance(rec, best) {
    const info = state.workloadInfo || {};
    const row = best || {};
    const items = [
      ["predictions", `${rec.model_version} (POST /v1/recommendations, POST /v1/predictions)`],
      ["prior", SOURCE_TEXT[rec.reference_source] || rec.reference_source],
      ["workload rows", info.kind === "builtin"
        ? `built-in: ${SOURCE_TEXT[info.source] || info.source}${info.citation && info.source === "published" ? ` — ${info.citation}` : ""}`
        : `stored workload ${info.id}` + (rec.workload_source ? ` (${SOURCE_TEXT[rec.workload_source] || rec.workload_source})` : "")],
      ["profiled modes", String(rec.profiled_modes)],
      ["cross-device", row.cross_device ? `yes: fitted on another device, predicted for ${rec.device}` : "no"],
      ["power", row.power_source === "reference" ? "device reference power model (no power in the rows; wider interval)"
        : row.power_source === "workload" ? "fitted on the workload's measured power" : (row.power_source || "–")],
      ["intervals", "90% (posterior, model form, run-to-run noise, extrapolation)"],
    ];
    if (rec.workload_source && info.kind === "builtin") items.splice(3, 0, ["workload source", rec.workload_source]);
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
    dl.dataset.referenceSource = rec.reference_source || "";
    dl.dataset.profiledModes = String(rec.profiled_modes);
  }

  // ---- Pareto chart (uPlot axes + canvas point cloud) --------------------------------------------------
  function paretoSeries() {
    const rec = state.rec;
    if (!rec || !rec.pareto.length) return [[], []];
    const front = rec.pareto.slice().sort((a, b) => a.epoch_time_s - b.epoch_time_s);
    return [front.map((r) => r.epoch_time_s), front.map((r) => r.epoch_energy_j)];
  }

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
    for (const pass of [0, 1]) {
      ctx.beginPath();
      for (let i = 0; i < data.n; i++) {
        const x = left + (Math.log10(t[i]) - lx0) * sx;
        const y = top + height - (Math.log10(e[i]) - ly0) * sy;
        if (pass === 0) { data.px[i] = (x - left) / ratio; data.py[i] = (y - top) / ratio; }
        if (data.feasible[i] === pass) ctx.rect(x - half, y - half, size, size);
      }
      ctx.fillStyle = pass ? "rgba(11, 107, 203, 0.22)" : "rgba(120, 120, 120, 0.12)";
      ctx.fill();
    }
    ctx.restore();
  }

  function drawChosen(u) {
    const best = state.rec && state.rec.best;
    if (!best) return;
    const x = u.valToPos(best.epoch_time_s, "x", true), y = u.valToPos(best.epoch_energy_j, "y", true);
    const ctx = u.ctx, r = 7 * uPlot.pxRatio;
    ctx.save();
    ctx.lineWidth = 2.5 * uPlot.pxRatio;
    ctx.strokeStyle = "#111";
    ctx.beginPath();
    ctx.arc(x, y, r, 0, 2 * Math.PI);
    ctx.stroke();
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
    tip.hidden = false;
    const over = u.over;
    tip.style.left = `${over.offsetLeft + Math.min(left + 14, over.clientWidth - 200)}px`;
    tip.style.top = `${over.offsetTop + top + 14}px`;
  }

  function describeMode(i) {
    const c = state.data.columns;
    return `${state.data.labels[i]}${state.data.feasible[i] ? "" : "  (over the cap)"}\n` +
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

  function drawPareto(rebuild) {
    const data = state.data;
    if (!data) return;
    if (rebuild || !state.chart) {
      if (state.chart) state.chart.destroy();
      const pad = (lo, hi) => [lo / Math.pow(hi / lo, 0.03), hi * Math.pow(hi / lo, 0.03)];
      data.xScale = pad(...data.timeRange);
      data.yScale = pad(...data.energyRange);
      markFeasible();
      const width = Math.max(420, Math.min(640, $("charts").clientWidth - 20));
      state.chart = new uPlot({
        width, height: 380,
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
        hooks: { drawAxes: [drawCloud], draw: [drawChosen], setCursor: [onCursor] },
      }, paretoSeries(), $("pareto"));
    } else {
      state.chart.setData(paretoSeries());  // the scales' range functions keep the axes fixed
    }
  }

  // ---- clock heat map -------------------------------------------------------------------------------
  function fillHeatmapSelectors() {
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

  function drawHeatmap() {
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
    const cssW = 560, cssH = 380;
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
    const indices = data.slices.get(`${cores}|${cpu}`) || [];
    const e = data.columns.epoch_energy_j, c = data.columns;
    let lo = Infinity, hi = -Infinity;
    for (const i of indices) { if (e[i] < lo) lo = e[i]; if (e[i] > hi) hi = e[i]; }
    for (const i of indices) {
      const gx = gpu.indexOf(c.gpu_mhz[i]), ey = emc.indexOf(c.emc_mhz[i]);
      ctx.fillStyle = colour(hi > lo ? (e[i] - lo) / (hi - lo) : 0.5);
      ctx.fillRect(m.left + gx * cw, cssH - m.bottom - (ey + 1) * ch, Math.ceil(cw), Math.ceil(ch));
    }
    if (best && best.cpu_cores === cores && best.cpu_mhz === cpu) {
      const gx = gpu.indexOf(best.gpu_mhz), ey = emc.indexOf(best.emc_mhz);
      if (gx >= 0 && ey >= 0) {
        ctx.strokeStyle = "#d1495b";
        ctx.lineWidth = 3;
        ctx.strokeRect(m.left + gx * cw + 1.5, cssH - m.bottom - (ey + 1) * ch + 1.5, cw - 3, ch - 3);
      }
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
    $("hm-legend").textContent = indices.length
      ? `${indices.length} modes; energy ${fmt(lo)} J (dark) to ${fmt(hi)} J (light) per epoch`
      : "no modes with these cores and CPU clock";
  }

  // ---- upload -------------------------------------------------------------------------------------
  async function upload() {
    const out = $("upload-status");
    out.className = "";
    const file = $("csv-file").files[0];
    const key = $("api-key").value.trim();
    try {
      if (!file) throw new Error("choose a profile CSV file first");
      if (!key) throw new Error("an API key is needed (one of the service's JETPREDICT_API_KEYS)");
      const rows = parseProfileCsv(await file.text());
      out.textContent = `uploading ${rows.length} rows…`;
      const result = await postJson("/v1/profiles", { rows }, "application/json", { "X-API-Key": key });
      out.textContent = `stored ${result.rows_stored} rows of ${result.workload_id}; fitted from ` +
        `${result.profiled_modes} profiled modes (${result.reference_source} prior)`;
      await loadWorkloads(`stored:${result.workload_id}`);
      await loadAll();
    } catch (err) {
      out.className = "error";
      out.textContent = `upload failed: ${err.message}`;
    }
  }

  // ---- wiring ------------------------------------------------------------------------------------------
  function fail(err) {
    setState("error", `Error: ${err.message}`);
  }

  async function start() {
    try {
      await loadDevices();
      await loadWorkloads();
      await loadAll();
    } catch (err) {
      fail(err);
    }
    $("device").addEventListener("change", () => {
      state.loadSeq++;
      state.recSeq++;
      setState("loading", "Loading workloads…");
      loadWorkloads().then(loadAll).catch(fail);
    });
    $("workload").addEventListener("change", () => loadAll().catch(fail));
    $("objective").addEventListener("change", scheduleRecommend);
    $("cap-kind").addEventListener("change", () => { setupCap(); scheduleRecommend(); });
    $("cap").addEventListener("input", scheduleRecommend);
    const manual = () => { $("hm-cores").dataset.auto = "0"; drawHeatmap(); };
    $("hm-cores").addEventListener("change", manual);
    $("hm-cpu").addEventListener("change", manual);
    $("copy").addEventListener("click", () => {
      if (navigator.clipboard) navigator.clipboard.writeText($("command").textContent).catch(() => {});
    });
    $("upload-button").addEventListener("click", upload);
  }

  window.jetpredictPage = { state, loadAll, recommend };
  start();
})();
