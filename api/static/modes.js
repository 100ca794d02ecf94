// The all-mode answer (POST /v1/predictions, columns layout) as typed arrays, and the indexes the charts
// and the cap slider read (clock steps, slices by cores and CPU clock, ranges).

const NUMERIC = ["cpu_cores", "cpu_mhz", "gpu_mhz", "emc_mhz", "epoch_time_s", "epoch_time_s_low",
  "epoch_time_s_high", "avg_power_w", "avg_power_w_low", "avg_power_w_high", "epoch_energy_j",
  "epoch_energy_j_low", "epoch_energy_j_high"];

// An all-mode answer in the columns layout (POST /v1/predictions, "layout": "columns") -> {n, labels,
// columns: {name: Float64Array}, extrapolated: Uint8Array, knobs: []}; null cells become NaN.
export function fromColumns(answer) {
  const cols = answer.columns || {};
  const n = answer.count;
  if (!Array.isArray(cols.mode) || cols.mode.length !== n) {
    throw new Error(`the all-mode answer has no "columns" of ${n} modes`);
  }
  const columns = {};
  for (const name of NUMERIC) {
    const source = cols[name];
    if (!source) continue;
    const array = new Float64Array(n);
    for (let i = 0; i < n; i++) array[i] = source[i] === null ? NaN : source[i];
    columns[name] = array;
  }
  const extrapolated = new Uint8Array(n);
  if (cols.extrapolated) for (let i = 0; i < n; i++) extrapolated[i] = cols.extrapolated[i] ? 1 : 0;
  return { n, labels: cols.mode, columns, extrapolated, knobs: cols.extrapolated_knobs || new Array(n).fill("") };
}

export function indexModes(data) {
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
  // Caps are met by the upper ends of the intervals: below the least no mode qualifies, at the largest
  // every mode does.
  [data.powerLeast, data.powerTop] = range(c.avg_power_w_high || c.avg_power_w);
  [data.timeLeast, data.timeTop] = range(c.epoch_time_s_high || c.epoch_time_s);
  data.feasible = new Uint8Array(data.n);
  data.px = new Float32Array(data.n);
  data.py = new Float32Array(data.n);
}
