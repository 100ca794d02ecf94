// jetpredict mode chooser. Reads only the public HTTP API; draws every mode of a device on canvas from
// typed arrays (29,232 modes on AGX Xavier), so the page stays responsive.
//
// Flow: device + workload + coverage -> POST /v1/predictions (modes "all" in the columns layout; then
// "presets") -> typed arrays -> charts; objective + cap + epochs -> POST /v1/recommendations (debounced) -> chosen mode,
// Pareto front, command, presets compared.
//
// Every answer is tagged with the request it answers. A load (device, workload or coverage changed) has a
// generation number `gen`; changing any of them starts a new generation, clears what was shown for the
// old one at once (synchronously, in the change handler), aborts its requests, and any answer of an older
// generation that still arrives is dropped. A recommendation is shown only when the key it was asked for
// (device, workload, coverage, objective, constraints, epochs) equals the key of the controls when it
// arrives. While a device loads, the controls that depend on it are disabled and a progress bar runs.
// A load that fails (service down, a request unanswered within state.requestTimeoutMs) frees the
// controls, and the next change of any of them loads again: the device's workload list first when the
// list on screen is not this device's.
//
// document.body.dataset: state "loading" | "ready" | "error" (the browser test and the benchmark wait on
// it); device: the device of the answer on screen ("" while none); request: the key of that answer (JSON);
// dropped: stale answers dropped so far. Timings: renderMs (drawing all modes once parsed), paintMs (until
// the frame holding them is on screen), parseMs (answer columns to typed arrays), fetchMs (the API calls,
// JSON decoding included), redrawMs (a cap change), readyMs (since navigation).
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
  const sourceText = (source) => SOURCE_TEXT[source] || source;
  // Coverages offered, as shares; those outside the API's range (read from /openapi.json) are left out.
  const COVERAGES = [0.5, 0.8, 0.9, 0.95, 0.99];
  const WORKLOAD_PAGE = 100;     // stored workloads listed at once; the search box finds the others
  const STEPS = 4;               // progress: workloads, rows, all-mode predictions, recommendation
  const MAX_REFITS = 3;          // loads in a row that newer fits (uploads meanwhile) may start: countRefit
  // Controls whose meaning depends on the device being loaded: disabled until its answer is on screen.
  // ("Copy command" too, but it also waits for a current answer with a best mode: syncCopy.)
  const DEVICE_BOUND = ["workload", "workload-search", "cap", "cap-number", "confidence", "hm-cores", "hm-cpu"];
  // Positions of the time-cap slider, on a log scale from the least to the largest cap that matters: each
  // moves the cap by the same share (0.5% over a 100-fold span); the number box beside it is exact.
  const TIME_POSITIONS = 1000;

  const state = {
    devices: [], builtins: new Map(), rowsCache: new Map(), presetModes: new Map(),
    data: null, presets: null, rec: null, chart: null,
    gen: 0, abort: null, recSeq: 0, recTimer: 0, recAbort: null, searchSeq: 0, searchTimer: 0, searchAbort: null,
    uploadSeq: 0, loading: false, limits: null, totals: null, dropped: 0, columnTypes: new Map(),
    provenance: null,  // what the all-mode answer of this generation says about itself (provenanceOf)
    caps: new Map(),  // the caps the user chose, by where each holds (capPlace); kept across coverages
    capScale: null,  // the cap slider's ends and scale (setupCap)
    refits: 0,  // loads in a row started for a newer fit (countRefit); a user's choice starts it again
    lookupLimit: WORKLOAD_PAGE,  // the most stored workloads one page may hold (read from /openapi.json)
    listedFor: null,  // the device whose workloads the workload list holds (null: none listed yet)
    linkNotes: { device: "", workload: "" },  // what of the page's link was not found, and what is shown
    // A request unanswered this long is abandoned with a message: a hung service must not leave the page
    // loading for ever. Generous, as fitting and predicting every mode of a large board under load takes
    // tens of seconds; the browser test lowers it.
    requestTimeoutMs: 60000,
  };

  // ---- HTTP ----------------------------------------------------------------------------------------
  // A busy service (503) or a rate limit (429) says when to come back (Retry-After, s): the request is
  // sent again then, a few times, unless it was abandoned (aborted) meanwhile.
  const RETRIES = 10;
  const MAX_RETRY_WAIT_S = 60;

  function sleep(ms, signal) {
    return new Promise((resolve, reject) => {
      const abandon = () => { clearTimeout(timer); reject(new DOMException("abandoned", "AbortError")); };
      const timer = setTimeout(() => { if (signal) signal.removeEventListener("abort", abandon); resolve(); }, ms);
      if (signal) {
        if (signal.aborted) abandon();
        else signal.addEventListener("abort", abandon, { once: true });
      }
    });
  }

  // Status words for the statuses a proxy or the service may answer without a JSON body (HTTP/2 answers
  // carry no reason phrase of their own).
  const STATUS_WORDS = {
    400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
    408: "Request Timeout", 413: "Content Too Large", 422: "Unprocessable Content", 429: "Too Many Requests",
    500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout",
  };
  // What browsers say when a request reaches no server (Chromium, Firefox, Safari).
  const UNREACHABLE = /failed to fetch|networkerror|load failed/i;

  // Aborted when any of `signals` is.
  function eitherSignal(signals) {
    if (AbortSignal.any) return AbortSignal.any(signals);
    const controller = new AbortController();
    for (const s of signals) {
      if (s.aborted) controller.abort();
      else s.addEventListener("abort", () => controller.abort(), { once: true });
    }
    return controller.signal;
  }

  // One request and its body, within state.requestTimeoutMs. The errors say what happened in words: the
  // service unreachable, or silent past the limit; an abort by the caller stays an AbortError (dropped).
  async function exchange(path, options) {
    const caller = options && options.signal;
    const clock = new AbortController();
    const limit = state.requestTimeoutMs;
    const timer = setTimeout(() => clock.abort(), limit);
    const signal = caller ? eitherSignal([caller, clock.signal]) : clock.signal;
    try {
      const response = await fetch(path, Object.assign({}, options, { signal }));
      return { response, text: await response.text() };
    } catch (err) {
      if (clock.signal.aborted && !(caller && caller.aborted)) {
        throw new Error(`the service at ${location.origin} did not answer ${requestName(path, options)} within ` +
          `${fmt(limit / 1000)} s: it may be overloaded or stuck; try again`);
      }
      if (err && err.name === "TypeError" && UNREACHABLE.test(err.message)) {
        throw new Error(`the service cannot be reached at ${location.origin}: is it running, and the network up?`);
      }
      throw err;
    } finally {
      clearTimeout(timer);
    }
  }

  const requestName = (path, options) => `${(options && options.method) || "GET"} ${path}`;

  async function api(path, options, attempt) {
    const { response, text } = await exchange(path, options);
    const tries = attempt || 0;
    if ((response.status === 503 || response.status === 429) && tries < RETRIES &&
        response.headers.get("Retry-After")) {
      const wait = Math.min(MAX_RETRY_WAIT_S, Math.max(1, +response.headers.get("Retry-After") || 1));
      const before = $("status").textContent;
      const note = ` (service busy: asking again in ${wait} s)`;
      if (!before.endsWith(note)) $("status").textContent = before.replace(/ \(service busy: .*\)$/, "") + note;
      document.body.dataset.retries = String(+(document.body.dataset.retries || 0) + 1);
      await sleep(wait * 1000, options && options.signal);
      return api(path, options, tries + 1);
    }
    const json = (response.headers.get("Content-Type") || "").includes("json");
    let body = text;
    if (json) {
      try { body = JSON.parse(text); } catch (err) {
        // an error page of a proxy may claim JSON: its status still says what happened
        if (response.ok) throw new Error(`the answer to ${requestName(path, options)} is not valid JSON`);
      }
    }
    if (!response.ok) {
      const err = new Error(errorMessage(response, body, path, options));
      err.status = response.status;
      throw err;
    }
    return body;
  }

  // The service's own message, with the fields it names unless the message already says what they say;
  // without one (a proxy's error page, say), the status in words.
  function errorMessage(response, body, path, options) {
    if (body && typeof body === "object" && typeof body.message === "string" && body.message) {
      const said = body.message;
      const fields = Object.entries(body.errors || {})
        .map(([field, v]) => [field, [].concat(v).map(String)])
        .filter(([field, texts]) => !texts.every((t) => said.includes(t)))
        .slice(0, 4)
        .map(([field, texts]) => `${field}: ${texts.join("; ")}`);
      return fields.length ? `${said} (${fields.join(" | ")})` : said;
    }
    const words = response.statusText || STATUS_WORDS[response.status] || "error";
    return `the service answered ${response.status} ${words} to ${requestName(path, options)}`;
  }

  function postJson(path, payload, accept, headers, signal) {
    return api(path, {
      method: "POST",
      headers: Object.assign({ "Content-Type": "application/json", Accept: accept || "application/json" },
        headers || {}),
      body: JSON.stringify(payload),
      signal,
    });
  }

  function setState(kind, message) {
    document.body.dataset.state = kind;
    if (message !== undefined) $("status").textContent = message;
    // A stale answer is "updating…" only while a new one is on its way; after an error none is coming.
    $("stale-badge").textContent = kind === "error" ? "out of date" : "updating…";
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

  // An all-mode answer in the columns layout (POST /v1/predictions, "layout": "columns") -> {n, labels,
  // columns: {name: Float64Array}, extrapolated: Uint8Array, knobs: []}; null cells become NaN.
  function fromColumns(answer) {
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

  // A profile CSV file -> row objects as POST /v1/profiles takes them: the API takes JSON numbers only, so
  // a cell of a column the document types as a number becomes a number; empty cell -> null (unknown).
  function parseProfileCsv(text) {
    const lines = csvLines(text.replace(/^\uFEFF/, ""));
    if (lines.length < 2) throw new Error("the file has no data rows");
    const header = splitQuoted(lines[0]).map((h) => h.trim());
    return lines.slice(1).map((line) => {
      const cells = splitQuoted(line);
      const row = {};
      header.forEach((h, i) => { row[h] = csvValue(h, cells[i]); });
      return row;
    });
  }

  // Decimal numbers as the service's CSV reader takes them (not JS-only forms such as 0x10 or Infinity).
  const DECIMAL = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;

  // One CSV cell as JSON. Text that is no number stays text in a numeric column, so that the API's 422
  // names the cell and the rule; text columns (and columns the document does not know) stay text.
  function csvValue(column, cell) {
    if (cell === undefined || cell === "") return null;
    const type = state.columnTypes.get(column);
    if (type !== "number" && type !== "integer") return cell;
    const text = cell.trim();
    if (text === "") return null;
    return DECIMAL.test(text) && Number.isFinite(Number(text)) ? Number(text) : cell;
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
  const percent = (share) => `${fmt(share * 100, 3)}%`;

  // ---- limits the API states (coverage, epochs) -------------------------------------------------------
  // The allowed coverage and epochs come from the service's OpenAPI document, not restated here; the
  // fields holding totals for `epochs` epochs are those the document describes as such.
  async function loadLimits() {
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
    $("epochs").min = String(limits.epochs.min);
    $("epochs").max = String(limits.epochs.max);
    state.limits = limits;  // last: a load that failed half-way is read again in full
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
  function epochsValue() {
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

  // ---- keys: which request an answer belongs to ------------------------------------------------------
  function dataKey() {
    return { device: $("device").value, workload: $("workload").value, confidence: +$("confidence").value };
  }

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
    const most = kind === "max_power_w" && maxPowerW(device) !== undefined ? Math.min(rule.max, maxPowerW(device))
      : rule.max;
    return [rule.min, most, rule.above];
  }

  // The cap box's value if the API takes it; else throws naming the field and the rule.
  function checkedCap() {
    const kind = $("cap-kind").value, cap = capValue();
    if (cap === null) return null;
    const [least, most, above] = capAllowed(kind);
    const unit = kind === "max_power_w" ? "W" : "s";
    if (!Number.isFinite(cap) || (above ? cap <= least : cap < least) || cap > most) {
      const box = $("cap-number").value.trim();
      throw new Error(`constraints.${kind}: must be a number ${above ? "above" : "from"} ${fmt(least)} ` +
        `${above ? "" : "to "}${above ? "and at most " : ""}${fmt(most)} ${unit}` +
        `${kind === "max_power_w" ? ` (the most ${deviceName($("device").value)} takes)` : ""}, ` +
        `got ${box ? `"${box}"` : "nothing"}`);
    }
    return cap;
  }

  function recKey() {
    const constraints = {};
    const cap = checkedCap();
    if (cap !== null) constraints[$("cap-kind").value] = cap;
    return Object.assign(dataKey(), { objective: $("objective").value, constraints, epochs: epochsValue() });
  }

  const sameKey = (a, b) => JSON.stringify(a) === JSON.stringify(b);

  function drop() {
    state.dropped++;
    document.body.dataset.dropped = String(state.dropped);
  }

  // ---- loading a device / workload / coverage ---------------------------------------------------------
  function setBusy(busy) {
    state.loading = busy;
    syncDisabled();
    syncCopy();
    $("progress").hidden = !busy;
    document.querySelector("main").setAttribute("aria-busy", busy ? "true" : "false");
  }

  // The controls that wait for the device's answer are disabled, except the focused one: disabling it would
  // drop the keyboard's focus to the page. That one is aria-disabled and holds its value (holdWhileBusy).
  function syncDisabled() {
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
  function holdWhileBusy(event) {
    const el = event.target;
    if (!(el instanceof HTMLElement) || el.getAttribute("aria-disabled") !== "true") return;
    event.stopImmediatePropagation();
    if (el.dataset.held !== undefined && el.value !== el.dataset.held) el.value = el.dataset.held;
  }

  function progress(gen, step, message) {
    if (gen !== state.gen) return;
    $("progress").value = step;
    setState("loading", `${message} (step ${step + 1} of ${STEPS})`);
  }

  function deviceName(id) {
    const d = state.devices.find((x) => x.id === id);
    return d ? d.name : id;
  }

  // A new generation: everything shown for the old device/workload/coverage goes, now, in this task.
  function beginLoad(message) {
    state.gen++;
    if (state.abort) state.abort.abort();
    state.abort = new AbortController();
    abortRecommendation();
    state.data = null;
    state.presets = null;
    state.rec = null;
    state.provenance = null;
    clearShown();
    setBusy(true);
    $("progress").value = 0;
    setState("loading", message);
    return state.gen;
  }

  function clearShown() {
    delete document.body.dataset.request;
    document.body.dataset.device = "";
    $("best").textContent = "–";
    $("best").dataset.mode = "";
    $("command").textContent = "–";
    $("command").dataset.mode = "";
    $("stale-badge").hidden = true;
    $("choice").classList.remove("stale");
    $("presets").tBodies[0].replaceChildren();
    $("front").tBodies[0].replaceChildren();
    $("best-note").textContent = "";
    $("best-note").hidden = true;
    $("preset-compare").textContent = "";
    $("provenance").replaceChildren();
    for (const k of Object.keys($("provenance").dataset)) delete $("provenance").dataset[k];
    $("tooltip").hidden = true;
    if (state.chart) { state.chart.destroy(); state.chart = null; }
    $("pareto").replaceChildren();
    $("pareto").dataset.device = "";
    const canvas = $("heatmap");
    canvas.getContext("2d").clearRect(0, 0, canvas.width, canvas.height);
    canvas.dataset.device = "";
    $("hm-legend").textContent = "";
    describeCharts();
    $("hm-cores").replaceChildren();  // the old board's clocks
    $("hm-cpu").replaceChildren();
    $("mode-count").textContent = "all";
  }

  // An error of the current generation is shown; one of an older generation (or an abort) is dropped.
  function failFor(gen) {
    return (err) => {
      if (gen !== state.gen || (err && err.name === "AbortError")) { drop(); return; }
      setBusy(false);  // the controls are free again: another choice may succeed
      // With nothing loaded, the next change of any control loads again (retryLoad), the device's
      // workload list first when the one shown is not this device's.
      const device = $("device").value;
      if (state.listedFor !== device && device) {
        $("workload-note").textContent = `the workloads of ${deviceName(device)} could not be listed yet`;
      }
      setState("error", `Error: ${err.message}` +
        (state.data || err.saysRetry ? "" : " (change any choice to try again)"));
    };
  }

  // After a failed load (nothing shown, nothing loading) a change of any control loads again, instead of
  // asking about data the page does not have; true when it did.
  function retryLoad() {
    if (state.data || state.loading) return false;
    reload(false);
    return true;
  }

  async function loadDevices() {
    const body = await api("/v1/devices");
    state.devices = body.devices;
    const select = $("device");
    select.replaceChildren(...body.devices.map((d) => new Option(`${d.name} (${d.power_modes} modes)`, d.id)));
    const wanted = new URLSearchParams(location.search).get("device");
    const known = body.devices.some((d) => d.id === wanted);
    select.value = known ? wanted
      : (body.devices.some((d) => d.id === "agx-xavier") ? "agx-xavier" : body.devices[0].id);
    // A link naming a device this service does not have says so, and which one is shown instead.
    state.linkNotes.device = wanted && !known ? `The link's device "${wanted}" is not one of this service's ` +
      `devices; showing ${deviceName(select.value)} (${select.value}) instead.` : "";
    showLinkNote();
  }

  // The notes on what the page's link asked for and did not find; gone once the user chooses otherwise.
  function showLinkNote() {
    const text = [state.linkNotes.device, state.linkNotes.workload].filter(Boolean).join(" ");
    $("link-note").textContent = text;
    $("link-note").hidden = !text;
  }

  function clearLinkNote() {
    state.linkNotes = { device: "", workload: "" };
    showLinkNote();
  }

  function storedGroup(listing, device) {
    const group = document.createElement("optgroup");
    group.label = listing.total > listing.workloads.length
      ? `stored workloads: ${listing.workloads.length} of ${listing.total.toLocaleString("en")} (search for others)`
      : "stored workloads (POST /v1/profiles)";
    group.dataset.kind = "stored";
    for (const w of listing.workloads) group.appendChild(storedOption(w, device));
    return group;
  }

  // One stored workload as an option; `chosen`: listed although outside the page of workloads shown.
  function storedOption(w, device, chosen) {
    // a workload may hold rows of several devices: its own rows are used where it has them
    const on = w.devices || [w.device];
    const cross = on.includes(device) ? "" : `, profiled on ${on.join(", ")}: cross-device`;
    return new Option(`${w.id} (${w.profiled_modes} profiled modes${cross})${chosen ? " (chosen)" : ""}`,
      `stored:${w.id}`);
  }

  // A stored workload by its exact id, outside the page listed (null when none is stored under it).
  async function findStored(id, signal) {
    const query = new URLSearchParams({ limit: String(state.lookupLimit), search: id });
    const listing = await api(`/v1/workloads?${query}`, { signal });
    return listing.workloads.find((w) => w.id === id) || null;
  }

  function storedPath(search) {
    const query = new URLSearchParams({ limit: String(WORKLOAD_PAGE) });
    if (search) query.set("search", search);
    return `/v1/workloads?${query}`;
  }

  function showWorkloadNote(listing, search) {
    const shown = listing.workloads.length, total = listing.total;
    $("workload-note").textContent = search
      ? `${total.toLocaleString("en")} stored workload${total === 1 ? " matches" : "s match"} "${search}"` +
        (total > shown ? `; the first ${shown} listed` : "")
      : (total > shown ? `${shown} of ${total.toLocaleString("en")} stored workloads listed; search for others` : "");
  }

  // `selectId`: a stored workload known to exist (just uploaded), chosen even when outside the page listed.
  async function loadWorkloads(gen, selectId) {
    const device = $("device").value;
    const search = $("workload-search").value.trim();
    const signal = state.abort.signal;
    const select = $("workload");
    const previous = select.value;
    const [stored, builtin] = await Promise.all([
      api(storedPath(search), { signal }),
      api(`/v1/reference-workloads?device=${encodeURIComponent(device)}`, { signal }),
    ]);
    if (gen !== state.gen) return false;
    // Keep the workload across a device switch when the new device has it; else its first built-in one.
    // A stored workload outside the page listed (the list holds the first ones by id) is looked up and
    // listed as chosen, so that what is predicted is what was asked for.
    // The link's workload counts only for the first list shown (nothing chosen yet).
    const linked = selectId || previous ? "" : new URLSearchParams(location.search).get("workload") || "";
    const wanted = selectId || previous || linked;
    const listed = stored.workloads.map((w) => `stored:${w.id}`)
      .concat(builtin.workloads.map((w) => `builtin:${w.source}:${w.workload}`));
    const listedBuiltins = builtin.workloads.map((w) => [`builtin:${w.source}:${w.workload}`, w.workload]);
    let extra = null;
    // A name that is not an option's value and no listed stored id may be a stored id outside the page:
    // looked up, as the stored workload of exactly that id comes before a built-in of that name.
    const lookUp = wanted && !wanted.startsWith("builtin:") && !listed.includes(wanted) &&
      !listed.includes(`stored:${wanted}`);
    if (lookUp) {
      const id = wanted.startsWith("stored:") ? wanted.slice(7) : wanted;
      const found = await findStored(id, signal).catch((err) => {
        if (err.name === "AbortError") throw err;
        return null;  // the lookup failed: treated as not stored (an upload's own id is listed anyway)
      });
      if (gen !== state.gen) return false;
      if (found) extra = storedOption(found, device, true);
      else if (selectId && wanted === selectId) extra = new Option(`${id} (chosen)`, `stored:${id}`);
    }
    const groups = [];
    const own = storedGroup(stored, device);
    if (extra) own.insertBefore(extra, own.firstChild);
    if (own.children.length) groups.push(own);
    const ref = document.createElement("optgroup");
    ref.label = "built-in workloads (bundled reference sweeps)";
    const builtins = new Map();
    for (const w of builtin.workloads) {
      const key = `builtin:${w.source}:${w.workload}`;
      builtins.set(key, w);
      ref.appendChild(new Option(`${w.workload} (${w.source}, ${w.modes} modes)`, key));
    }
    state.builtins.set(device, builtins);
    if (ref.children.length) groups.push(ref);
    select.replaceChildren(...groups);
    showWorkloadNote(stored, search);
    const values = Array.from(select.options).map((o) => o.value);
    const match = matchWorkload(values, listedBuiltins, wanted);
    if (match) select.value = match;
    else if (values.length) select.value = values.find((v) => v.startsWith("builtin:")) || values[0];
    state.listedFor = device;
    noteLinkedWorkload(linked, match, device);
    return true;
  }

  // The option that `wanted` (an option's value, a stored id or a built-in workload's name) names, matched
  // exactly: the option of that value, else the stored workload of that id, else the first built-in of that
  // name (`builtins`: [value, name] pairs); never an option whose value merely ends with it, which would
  // open another workload (a stored "team:resnet18-cifar10" for the built-in "resnet18-cifar10").
  function matchWorkload(values, builtins, wanted) {
    if (!wanted) return undefined;
    if (values.includes(wanted)) return wanted;
    if (values.includes(`stored:${wanted}`)) return `stored:${wanted}`;
    const named = builtins.find(([value, name]) => name === wanted && values.includes(value));
    return named ? named[0] : undefined;
  }

  // A link naming a workload this device does not have says so, and which one is shown instead.
  function noteLinkedWorkload(linked, match, device) {
    const select = $("workload");
    const shown = select.selectedIndex >= 0 ? `showing ${select.options[select.selectedIndex].textContent} instead`
      : "no workload to show: upload a profile CSV below";
    state.linkNotes.workload = linked && !match
      ? `The link's workload "${linked}" was not found for ${deviceName(device)}; ${shown}.` : "";
    showLinkNote();
  }

  // The search box: only the stored group is replaced; the current choice stays chosen (and listed).
  // A newer search aborts an older one; the answer (or failure) of any but the newest is dropped.
  async function searchWorkloads() {
    const seq = ++state.searchSeq;
    if (state.searchAbort) state.searchAbort.abort();
    const controller = new AbortController();
    state.searchAbort = controller;
    const search = $("workload-search").value.trim();
    const gen = state.gen;
    let stored;
    try {
      stored = await api(storedPath(search), { signal: controller.signal });
    } catch (err) {
      if (seq !== state.searchSeq || gen !== state.gen || err.name === "AbortError") { drop(); return; }
      $("workload-note").textContent = `search failed: ${err.message}`;
      return;
    }
    if (seq !== state.searchSeq || gen !== state.gen) { drop(); return; }
    const select = $("workload");
    const current = select.value;
    const own = storedGroup(stored, $("device").value);
    if (current.startsWith("stored:") && !Array.from(own.children).some((o) => o.value === current)) {
      own.insertBefore(new Option(`${current.slice(7)} (chosen)`, current), own.firstChild);
    }
    const old = select.querySelector('optgroup[data-kind="stored"]');
    if (old) old.replaceWith(own);
    else if (own.children.length) select.insertBefore(own, select.firstChild);
    if (!own.children.length) own.remove();
    select.value = current;
    showWorkloadNote(stored, search);
  }

  // The workload as POST /v1/predictions takes it, and what to say about it; built-in rows are fetched once.
  async function workloadRef(key, signal) {
    const value = key.workload;
    if (!value) throw new Error("no workload for this device yet: upload a profile CSV below");
    if (value.startsWith("stored:")) return [{ id: value.slice(7) }, { kind: "stored", id: value.slice(7) }];
    const info = (state.builtins.get(key.device) || new Map()).get(value);
    if (!info) throw new Error(`workload: ${value} is not a built-in workload of ${key.device}`);
    const cacheKey = `${key.device}|${value}`;
    if (!state.rowsCache.has(cacheKey)) {
      const path = `/v1/reference-workloads/${encodeURIComponent(info.device)}/` +
        `${encodeURIComponent(info.workload)}?source=${encodeURIComponent(info.source)}`;
      state.rowsCache.set(cacheKey, (await api(path, { signal })).rows);
    }
    return [{ rows: state.rowsCache.get(cacheKey) }, Object.assign({ kind: "builtin" }, info)];
  }

  // ---- all modes --------------------------------------------------------------------------------------
  async function loadAll(gen) {
    if (gen !== state.gen) return;
    const key = dataKey();  // what this load answers: fixed for the whole generation
    const signal = state.abort.signal;
    const name = deviceName(key.device);
    progress(gen, 1, `Reading the workload for ${name}…`);
    const t0 = performance.now();
    const [ref, info] = await workloadRef(key, signal);
    if (gen !== state.gen) { drop(); return; }
    const count = (state.devices.find((d) => d.id === key.device) || {}).power_modes;
    progress(gen, 2, `Fitting the workload and predicting all ${count ? count.toLocaleString("en") : ""} modes of ${name}…`);
    const request = { device: key.device, workload: ref, confidence: key.confidence };
    // One after the other: the first fits the workload (heavy; the service admits few at once), the
    // presets then reuse that fit. The presets only mark the chart and the table: without them the
    // chooser still works, and says so.
    const all = await postJson("/v1/predictions", Object.assign({ modes: "all", layout: "columns" }, request),
      "application/json", null, signal);
    if (gen !== state.gen) { drop(); return; }
    if (all.device !== key.device) throw new Error(`the answer is for ${all.device}, not ${key.device}`);
    const presets = await postJson("/v1/predictions", Object.assign({ modes: "presets" }, request),
      "application/json", null, signal)
      .catch((err) => (err.name === "AbortError" ? Promise.reject(err) : { device: key.device, error: err }));
    if (gen !== state.gen || !sameKey(key, dataKey())) { drop(); return; }
    if (presets.device !== key.device) throw new Error(`the answer is for ${presets.device}, not ${key.device}`);
    // An upload refitted the workload between the two answers: ask both again, from one fit.
    if (presets.revision !== undefined && presets.revision !== all.revision) {
      countRefit();
      return loadAll(gen);
    }
    state.presetsError = presets.error ? presets.error.message : null;
    const t1 = performance.now();
    const data = fromColumns(all);
    data.key = key;
    data.device = key.device;
    data.revision = all.revision ?? null;  // a stored workload's fit (null: inline rows)
    document.body.dataset.fetchMs = (t1 - t0).toFixed(0);
    state.data = data;
    state.presets = presets.predictions || [];
    state.workloadRef = ref;
    state.workloadInfo = info;
    state.provenance = provenanceOf(all);
    indexModes(data);
    setupCap();
    fillHeatmapSelectors();
    const t2 = performance.now();
    drawPareto(true);
    drawHeatmap();
    showProvenance(null, null);  // the all-mode answer's own, until (or unless) a recommendation says more
    document.body.dataset.renderMs = (performance.now() - t2).toFixed(1);
    // uPlot draws in a microtask and the browser rasterises at the next frame: time until that frame is done.
    await new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0)));
    if (gen !== state.gen) { drop(); return; }
    document.body.dataset.paintMs = (performance.now() - t2).toFixed(1);
    document.body.dataset.parseMs = (t2 - t1).toFixed(1);
    document.body.dataset.modes = String(data.n);
    $("mode-count").textContent = `all ${data.n.toLocaleString("en")}`;
    progress(gen, 3, `Choosing the best mode of ${name}…`);
    await recommend(gen);
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
    // Caps are met by the upper ends of the intervals: below the least no mode qualifies, at the largest
    // every mode does.
    [data.powerLeast, data.powerTop] = range(c.avg_power_w_high || c.avg_power_w);
    [data.timeLeast, data.timeTop] = range(c.epoch_time_s_high || c.epoch_time_s);
    data.feasible = new Uint8Array(data.n);
    data.px = new Float32Array(data.n);
    data.py = new Float32Array(data.n);
  }

  // ---- cap slider ----------------------------------------------------------------------------------
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

  // The largest power cap the API takes for `device` (W; undefined when the document states none).
  const maxPowerW = (device) => state.limits.maxPowerW[device];

  const onStep = (v) => +v.toPrecision(12);  // 0.1 x 3 as 0.3: the slider's bounds as people read them

  // The power slider's step and bounds for caps spanning [lo, hi] W (`most`: the largest cap the API
  // takes, or undefined; the time slider is log-scaled, timeScale). It moves in 0.5 W; the bounds are
  // whole steps: the least rounded down (but at least one step, as the API takes only caps above 0), the
  // top rounded up so that it lets in the largest upper end, down where that passes `most`.
  function powerSlider(lo, hi, most) {
    const step = 0.5;
    const min = Math.max(step, onStep(Math.floor(lo / step) * step));
    const top = onStep(Math.ceil(hi / step) * step);
    const max = most !== undefined && top > most ? onStep(Math.floor(most / step) * step) : top;
    return { step, min, max: Math.max(min, max) };
  }

  // The time slider's caps: positions 0..TIME_POSITIONS on a log scale over [min, max] (s), min the least
  // upper end rounded down and max the largest rounded up (4 significant digits), so that the ends let in
  // no mode and every mode.
  function timeScale(lo, hi) {
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
  function setupCap() {
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

  function onCapSlider() {
    const scale = state.capScale;
    if (!scale) return;
    const cap = capAt(scale, +$("cap").value);
    $("cap-number").value = String(cap);
    state.caps.set(capPlace($("cap-kind").value, dataKey()), cap);
    $("cap-note").textContent = "";
    scheduleRecommend();
  }

  function onCapNumber() {
    const cap = capValue();
    if (Number.isFinite(cap) && cap > 0) {
      state.caps.set(capPlace($("cap-kind").value, dataKey()), cap);
      if (state.capScale) $("cap").value = String(positionOf(state.capScale, cap));
    }
    $("cap-note").textContent = "";
    scheduleRecommend();
  }

  // The cap in words, on screen and for assistive technology (the slider's own name and value text).
  function showCap() {
    const kind = $("cap-kind").value;
    const v = capValue();
    const power = kind === "max_power_w";
    const unit = power ? "W" : "s";
    const said = v === null ? "no cap" : (Number.isFinite(v) ? `≤ ${fmt(v)} ${unit}` : "no valid cap");
    $("cap-value").textContent = said;
    const name = v === null ? "cap (none chosen)" : (power ? "power cap" : "time cap");
    $("cap").setAttribute("aria-label", name);
    $("cap").setAttribute("aria-valuetext", v === null ? "no cap" : `${name} ${v} ${unit}`);
    $("cap-number").setAttribute("aria-label", v === null ? "cap (none chosen)" : `${name} in ${unit}, exact`);
  }

  // Caps hold for the upper end of each interval (as POST /v1/recommendations applies them).
  function meetsCap(power, powerHigh, time, timeHigh) {
    const kind = $("cap-kind").value, cap = capValue();
    if (cap === null) return true;
    const v = kind === "max_power_w" ? (Number.isNaN(powerHigh) ? power : powerHigh)
      : (Number.isNaN(timeHigh) ? time : timeHigh);
    return v <= cap;
  }

  function markFeasible() {
    const data = state.data;
    const c = data.columns;
    const ph = c.avg_power_w_high || c.avg_power_w, th = c.epoch_time_s_high || c.epoch_time_s;
    for (let i = 0; i < data.n; i++) {
      data.feasible[i] = meetsCap(c.avg_power_w[i], ph[i], c.epoch_time_s[i], th[i]) ? 1 : 0;
    }
  }

  // ---- recommendation ---------------------------------------------------------------------------------
  function abortRecommendation() {
    clearTimeout(state.recTimer);
    state.recSeq++;  // an answer to an earlier request must not be shown
    if (state.recAbort) state.recAbort.abort();
    state.recAbort = null;
  }

  // The shown answer no longer answers the controls: say so until the new one arrives.
  function markStale() {
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

  function scheduleRecommend() {
    showCap();
    if (retryLoad()) return;  // a failed load: load again, and that load asks with these controls
    // Before a load has its data there is nothing to ask about: the load asks with the controls as they are
    // then. Once it has them (its recommendation in flight), a change asks again and drops that answer.
    if (!state.data) return;
    abortRecommendation();
    const problem = checkInputs();
    if (problem) {
      // The recommendation in flight (the load's own, maybe) is cancelled and none is asked: the device's
      // data stay on screen and the controls are free again, as recommend() leaves them for a bad number.
      markStale();
      setBusy(false);
      setState("error", problem);
      return;
    }
    markStale();
    state.refits = 0;  // the user's choice: a newer fit may be loaded again
    setState("loading", "Choosing the best mode…");
    const gen = state.gen;
    state.recTimer = setTimeout(() => recommend(gen).catch(failFor(gen)), 150);
  }

  // The epochs and cap boxes checked, each error beside its box; all of them in one line ("" when none).
  function checkInputs() {
    const problems = [];
    for (const [check, out] of [[epochsValue, "epochs-error"], [checkedCap, "cap-error"]]) {
      try {
        check();
        $(out).textContent = "";
      } catch (err) {
        $(out).textContent = err.message;
        problems.push(err.message);
      }
    }
    return problems.join("; ");
  }

  async function recommend(gen) {
    const data = state.data;
    if (gen !== state.gen || !data) return;
    const problem = checkInputs();
    if (problem) {  // a bad epochs or cap box: the device's data are shown, the choice waits for valid numbers
      setBusy(false);
      setState("error", problem);
      return;
    }
    const key = recKey();
    if (!sameKey(data.key, dataKey())) { drop(); return; }
    abortRecommendation();
    const seq = state.recSeq;
    state.recAbort = new AbortController();
    const body = { device: key.device, workload: state.workloadRef, objective: key.objective,
      constraints: key.constraints, confidence: key.confidence };
    if (key.epochs !== null) body.epochs = key.epochs;
    if (!state.loading) setState("loading", "Choosing the best mode…");
    const rec = await postJson("/v1/recommendations", body, "application/json", null, state.recAbort.signal);
    // Shown only if nothing changed since it was asked: same generation, same request, same controls.
    if (seq !== state.recSeq || gen !== state.gen || data !== state.data || !sameKey(key, safeKey())) {
      drop();
      return;
    }
    if (rec.device !== key.device) throw new Error(`the answer is for ${rec.device}, not ${key.device}`);
    if ((rec.revision ?? null) !== data.revision) {
      // The stored workload was refitted (an upload) since its modes were loaded: the cloud, the presets and
      // the choice must come from one fit, so all of them are loaded again (a few times at most in a row).
      drop();
      countRefit();
      const gen2 = beginLoad(`The workload was refitted (revision ${rec.revision}): loading its modes again…`);
      loadFor(gen2, false).catch(failFor(gen2));
      return;
    }
    state.refits = 0;
    state.rec = rec;
    const t0 = performance.now();
    markFeasible();
    showChoice(rec, key);
    showPresets(rec);
    showFront(rec);
    drawPareto(false);
    drawHeatmap();
    document.body.dataset.redrawMs = (performance.now() - t0).toFixed(1);
    document.body.dataset.readyMs = performance.now().toFixed(0);  // since navigation started
    document.body.dataset.request = JSON.stringify(key);
    document.body.dataset.device = key.device;
    document.body.dataset.revision = data.revision === null ? "" : String(data.revision);
    $("choice").classList.remove("stale");
    $("stale-badge").hidden = true;
    setBusy(false);  // and Copy, now that the answer is current
    setState("ready", rec.feasible
      ? `${deviceName(key.device)}: ${data.n.toLocaleString("en")} modes predicted; ${rec.pareto.length} on the ` +
        "time–energy front within the cap."
      : `${deviceName(key.device)}: no mode meets the cap: ${rec.reason}`);
  }

  // One more load in a row for a newer fit of the workload; past MAX_REFITS the page stops loading and says
  // which choices load it again (each starts the count again: reload, scheduleRecommend, upload).
  function countRefit() {
    if (++state.refits <= MAX_REFITS) return;
    const err = new Error("the stored workload keeps being refitted while it loads (uploads keep arriving): " +
      "choose the device, workload or coverage, or change the objective, cap or epochs, to load it again");
    err.saysRetry = true;  // failFor adds no hint of its own
    throw err;
  }

  function safeKey() {
    try { return recKey(); } catch (err) { return null; }
  }

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

  function showChoice(rec, key) {
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
  function showPresets(rec) {
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
  function showFront(rec) {
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

  // What an answer says about where its numbers come from (top-level fields; an all-mode answer in the
  // columns layout also states cross_device, power_source and confidence once, for every mode).
  const PROVENANCE = ["device", "model_version", "reference_source", "workload_source", "profiled_modes",
    "workload_id", "workload_devices", "rows_device", "cross_device", "power_source", "confidence"];

  function provenanceOf(answer) {
    const out = {};
    for (const k of PROVENANCE) if (answer && answer[k] !== undefined && answer[k] !== null) out[k] = answer[k];
    return out;
  }

  // true, false, or null when no answer says: the chosen mode's own flag, else whose rows the recommendation
  // rests on, else the all-mode answer's flag (or its rows_device).
  function crossDevice(rec, best, all) {
    if (best && typeof best.cross_device === "boolean") return best.cross_device;
    if (rec && rec.rows_device && rec.device) return rec.rows_device !== rec.device;
    if (typeof all.cross_device === "boolean") return all.cross_device;
    if (all.rows_device && all.device) return all.rows_device !== all.device;
    return null;
  }

  // Shown as soon as the all-mode answer is drawn (rec null), and again with each recommendation, whose
  // fields win where it has them: with no mode under the cap (best null) the all-mode answer still says
  // whether the predictions are cross-device and where the power comes from.
  function showProvenance(rec, best) {
    const info = state.workloadInfo || {};
    const all = state.provenance || {};
    const p = Object.assign({}, all, provenanceOf(rec));
    const device = p.device || (state.data && state.data.device) || $("device").value;
    const cross = crossDevice(rec, best, all);
    const rowsOn = p.rows_device && p.rows_device !== device ? `${deviceName(p.rows_device)} (${p.rows_device})`
      : "another device";
    const power = (best && best.power_source) || all.power_source || null;
    const rowsSource = p.workload_source || (info.kind === "builtin" ? info.source : null);
    const confidence = rec ? rec.confidence : (all.confidence ?? (state.data && state.data.key.confidence));
    const items = [
      ["predictions", `${p.model_version || "–"} (${rec ? "POST /v1/recommendations, " : ""}POST /v1/predictions)`],
      ["device", `${deviceName(device)} (${device})`],
      ["prior", p.reference_source ? sourceText(p.reference_source) : "–"],
      ["workload rows", info.kind === "builtin"
        ? `built-in: ${sourceText(info.source)}${info.citation && info.source === "published" ? ` — ${info.citation}` : ""}`
        : `stored workload ${info.id}` + (p.workload_source ? ` (${sourceText(p.workload_source)})` : "") +
          (state.data && state.data.revision !== null ? `, revision ${state.data.revision}` : "")],
      ["profiled modes", p.profiled_modes === undefined ? "–" : String(p.profiled_modes)],
      // never "no" unless an answer says so
      ["cross-device", cross === true ? `yes: fitted on rows of ${rowsOn}, predicted for ${device} (wider intervals)`
        : cross === false ? `no: fitted on ${device}'s own rows` : "– (the answer does not say)"],
      // the rows' own source (the answer's, else the built-in's listing): twin rows' power is simulated
      ["power", power === "reference"
        ? `device reference power model${p.reference_source ? `: ${sourceText(p.reference_source)}` : ""}` +
          " (no power in the rows; wider interval)"
        : power === "workload" ? `fitted on the workload's own power${rowsSource ? `: ${sourceText(rowsSource)}` : ""}`
          : (power || "–")],
      ["intervals", confidence === undefined || confidence === null ? "–"
        : `${percent(confidence)} (posterior, model form, run-to-run noise, extrapolation)`],
    ];
    if (p.workload_source && info.kind === "builtin") items.splice(4, 0, ["workload source", p.workload_source]);
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
    dl.dataset.referenceSource = p.reference_source || "";
    dl.dataset.profiledModes = p.profiled_modes === undefined ? "" : String(p.profiled_modes);
    dl.dataset.crossDevice = cross === null ? "" : String(cross);
    dl.dataset.powerSource = power || "";
    dl.dataset.answer = rec ? "recommendation" : "predictions";  // the newest answer it draws on
  }

  // ---- Pareto chart (uPlot axes + canvas point cloud) --------------------------------------------------
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

  function drawPareto(rebuild) {
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
  function chartSize() {
    const inner = $("pareto").parentElement.clientWidth - 18;  // the figure's padding and border
    const width = Math.round(Math.max(220, Math.min(640, inner)));
    return { width, height: Math.round(Math.min(380, Math.max(240, width * 0.68))) };
  }

  // A window that changes width resizes the charts to their figures (after the resizing settles).
  function onResize() {
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
  function describeCharts() {
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

  // ---- upload -------------------------------------------------------------------------------------
  // One upload at a time: the button is disabled until its answer is in. Each has a sequence number, and
  // the answer (or failure) of any but the newest is dropped, so an older one cannot overwrite what a
  // newer one said or chose.
  async function upload() {
    const seq = ++state.uploadSeq;
    const out = $("upload-status");
    const button = $("upload-button");
    out.className = "";
    button.disabled = true;
    const file = $("csv-file").files[0];
    const key = $("api-key").value.trim();
    try {
      if (!file) throw new Error("choose a profile CSV file first");
      if (!key) throw new Error("an API key is needed (one of the service's JETPREDICT_API_KEYS)");
      const rows = parseProfileCsv(await file.text());
      if (seq !== state.uploadSeq) { drop(); return; }
      out.textContent = `uploading ${rows.length} rows…`;
      const result = await postJson("/v1/profiles", { rows }, "application/json", { "X-API-Key": key });
      if (seq !== state.uploadSeq) { drop(); return; }
      out.textContent = `stored ${result.rows_stored} rows of ${result.workload_id}; fitted from ` +
        `${result.profiled_modes} profiled modes (${result.reference_source} prior)`;
      $("workload-search").value = "";
      state.refits = 0;  // the user's upload starts the count again
      const gen = beginLoad("Loading workloads…");
      loadWorkloads(gen, `stored:${result.workload_id}`)
        .then((ok) => (ok ? loadAll(gen) : drop())).catch(failFor(gen));
    } catch (err) {
      if (seq !== state.uploadSeq) { drop(); return; }
      out.className = "error";
      out.textContent = `upload failed: ${err.message}`;
    } finally {
      if (seq === state.uploadSeq) button.disabled = false;
    }
  }

  // ---- wiring ------------------------------------------------------------------------------------------
  // A new load; the workload list first when asked (`withWorkloads`: the device or the upload changed it)
  // or when the one shown is not this device's (its load failed); the devices and the API's limits first
  // when the page's start failed to read them.
  function reload(withWorkloads) {
    state.refits = 0;  // every caller is a user's choice (or the page's start)
    const name = $("device").value ? deviceName($("device").value) : "devices";
    const gen = beginLoad(`Loading ${name}… (step 1 of ${STEPS})`);
    loadFor(gen, withWorkloads).catch(failFor(gen));
  }

  async function loadFor(gen, withWorkloads) {
    if (!state.devices.length || !state.limits) {
      await Promise.all([state.devices.length ? null : loadDevices(), state.limits ? null : loadLimits()]);
      if (gen !== state.gen) { drop(); return; }
    }
    const device = $("device").value;
    if (withWorkloads || state.listedFor !== device) {
      progress(gen, 0, `Loading ${deviceName(device)}: its workloads…`);
      if (!(await loadWorkloads(gen))) { drop(); return; }
    }
    await loadAll(gen);
  }

  function start() {
    wire();
    reload(true);
  }

  function wire() {
    $("device").addEventListener("change", () => { clearLinkNote(); reload(true); });
    $("workload").addEventListener("change", () => { clearLinkNote(); reload(false); });
    $("confidence").addEventListener("change", () => reload(false));
    $("workload-search").addEventListener("input", () => {
      clearTimeout(state.searchTimer);
      // after a failed device load the list may be another device's: list this one's, with the search
      if (!state.loading && state.listedFor !== $("device").value) { reload(true); return; }
      state.searchTimer = setTimeout(() => {
        const seq = state.searchSeq + 1;  // the one this call takes: a failure after a newer search is dropped
        searchWorkloads().catch((err) => {
          if (seq !== state.searchSeq) { drop(); return; }
          $("workload-note").textContent = `search failed: ${err.message}`;
        });
      }, 200);
    });
    $("objective").addEventListener("change", scheduleRecommend);
    $("cap-kind").addEventListener("change", () => { if (state.data) setupCap(); scheduleRecommend(); });
    $("cap").addEventListener("input", onCapSlider);
    $("cap-number").addEventListener("input", onCapNumber);
    document.addEventListener("input", holdWhileBusy, true);
    document.addEventListener("change", holdWhileBusy, true);
    $("epochs").addEventListener("input", scheduleRecommend);
    const manual = () => { $("hm-cores").dataset.auto = "0"; drawHeatmap(); };
    $("hm-cores").addEventListener("change", manual);
    $("hm-cpu").addEventListener("change", manual);
    $("copy").addEventListener("click", () => {
      if (navigator.clipboard) navigator.clipboard.writeText($("command").textContent).catch(() => {});
    });
    $("upload-button").addEventListener("click", upload);
    window.addEventListener("resize", onResize);
  }

  window.jetpredictPage = { state, recommend, reload, powerSlider, timeScale };
  start();
})();
