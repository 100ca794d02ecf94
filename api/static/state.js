// What the page holds between events: one shared state object (each module reads and sets its own
// fields), the element lookup $, and the count of stale answers dropped (document.body.dataset.dropped).

export const $ = (id) => document.getElementById(id);

export const WORKLOAD_PAGE = 100;  // stored workloads listed at once; the search box finds the others

export const state = {
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
  linkNotes: {},  // what of the page's link was not used (by what it named), and what is shown instead
  linkCap: null,  // the cap the page's link names ({kind, value}), taken by the first load that sets up the cap
  linkTimer: 0,  // the pending write of the choices into the page's link (writeLink)
  workloadNotes: { listing: "", changed: "" },  // the workload note's parts (workloads.js)
  // The scatter of a fit's rows about it above which the service warns (read from /openapi.json; null if unsaid)
  scatterWarnRel: null,
  // A request unanswered this long is abandoned with a message: a hung service must not leave the page
  // loading for ever. Generous, as fitting and predicting every mode of a large board under load takes
  // tens of seconds; the browser test lowers it.
  requestTimeoutMs: 60000,
};

export function drop() {
  state.dropped++;
  document.body.dataset.dropped = String(state.dropped);
}
