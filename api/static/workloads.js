// The workload list: stored workloads (a page of them, the search box for the others, one outside the page
// looked up by id) and the device's built-in ones; and the workload as POST /v1/predictions takes it.

import { deviceName } from "./devices.js";
import { api } from "./http.js";
import { linked, scheduleLinkWrite, showLinkNote } from "./link.js";
import { $, WORKLOAD_PAGE, drop, state } from "./state.js";

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
  state.workloadNotes.listing = search
    ? `${total.toLocaleString("en")} stored workload${total === 1 ? " matches" : "s match"} "${search}"` +
      (total > shown ? `; the first ${shown} listed` : "")
    : (total > shown ? `${shown} of ${total.toLocaleString("en")} stored workloads listed; search for others` : "");
  renderWorkloadNote();
}

// The workload note: what the list holds (a search's matches) and why the workload shown is not the one
// chosen before (a device switch), each kept until what it says changes.
function renderWorkloadNote() {
  const { listing, changed } = state.workloadNotes;
  $("workload-note").textContent = [listing, changed].filter(Boolean).join(". ");
}

// The user chose a workload: the note on why another one was shown goes.
export function clearChangedWorkloadNote() {
  state.workloadNotes.changed = "";
  renderWorkloadNote();
}

// `selectId`: a stored workload known to exist (just uploaded), chosen even when outside the page listed.
export async function loadWorkloads(gen, selectId) {
  const device = $("device").value;
  const search = $("workload-search").value.trim();
  const signal = state.abort.signal;
  const select = $("workload");
  const previous = select.value;
  const previousDevice = state.listedFor;
  const [stored, builtin] = await Promise.all([
    api(storedPath(search), { signal }),
    api(`/v1/reference-workloads?device=${encodeURIComponent(device)}`, { signal }),
  ]);
  if (gen !== state.gen) return false;
  // Keep the workload across a device switch when the new device has it; else its first built-in one.
  // A stored workload outside the page listed (the list holds the first ones by id) is looked up and
  // listed as chosen, so that what is predicted is what was asked for.
  // The link's workload counts only for the first list shown (nothing chosen yet).
  const fromLink = selectId || previous ? "" : linked("workload");
  const wanted = selectId || previous || fromLink;
  const listed = stored.workloads.map((w) => `stored:${w.id}`)
    .concat(builtin.workloads.map((w) => `builtin:${w.source}:${w.workload}`));
  const listedBuiltins = builtin.workloads.map((w) => [`builtin:${w.source}:${w.workload}`, w.workload, w.source]);
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
  state.workloadNotes.changed = !selectId && previous && select.value !== previous
    ? changedWorkloadNote(previous, select.value, previousDevice, device) : "";
  renderWorkloadNote();
  noteLinkedWorkload(fromLink, match, device);
  // the first list keeps the page's link as it came; a list for the user's choice writes what is shown
  if (previous || selectId) scheduleLinkWrite();
  return true;
}

// A built-in workload's option value ("builtin:SOURCE:NAME") as {source, name}; null for any other value.
function builtinParts(value) {
  const found = /^builtin:([^:]+):(.+)$/.exec(value || "");
  return found ? { source: found[1], name: found[2] } : null;
}

// The option that `wanted` (an option's value, a stored id or a built-in workload's name) names, matched
// exactly: the option of that value, else the stored workload of that id, else a built-in of that name
// (`builtins`: [value, name, source]), of the same source where `wanted` names one (a device switch keeps
// AGX Xavier's published ResNet-18 as another device's simulated one: the same network); never an option
// whose value merely ends with it, which would open another workload (a stored "team:resnet18-cifar10" for
// the built-in "resnet18-cifar10").
function matchWorkload(values, builtins, wanted) {
  if (!wanted) return undefined;
  if (values.includes(wanted)) return wanted;
  if (values.includes(`stored:${wanted}`)) return `stored:${wanted}`;
  const parts = builtinParts(wanted);
  const name = parts ? parts.name : wanted;
  const named = (source) => builtins.find(([value, n, s]) => n === name && (source === undefined || s === source) &&
    values.includes(value));
  const found = (parts && named(parts.source)) || named();
  return found ? found[0] : undefined;
}

// A workload option's value in words: "resnet18-cifar10 (published)", "stored workload my-net".
function workloadWords(value) {
  const parts = builtinParts(value);
  if (parts) return `${parts.name} (${parts.source})`;
  return value.startsWith("stored:") ? `stored workload ${value.slice(7)}` : value;
}

// Why the workload shown on `device` is `now` where `was` was chosen on `from` (a device switch): which
// it was, what it is now, and why.
function changedWorkloadNote(was, now, from, device) {
  const before = builtinParts(was), after = builtinParts(now);
  const on = from && from !== device ? ` on ${deviceName(from)}` : "";
  const why = before && after && before.name === after.name
    ? `${deviceName(device)} has no ${before.source} sweep of ${before.name}`
    : before ? `${deviceName(device)} has no built-in ${before.name}` : `${workloadWords(was)} was not found`;
  return `Was ${workloadWords(was)}${on}; ${why}, so showing ${now ? workloadWords(now) : "no workload"}`;
}

// A link naming a workload this device does not have says so, and which one is shown instead; one naming a
// built-in workload of another source (its published sweep, where this device has a simulated one) too.
function noteLinkedWorkload(fromLink, match, device) {
  const select = $("workload");
  const shown = select.selectedIndex >= 0 ? `showing ${select.options[select.selectedIndex].textContent} instead`
    : "no workload to show: upload a profile CSV below";
  const asked = builtinParts(fromLink), got = builtinParts(match);
  const otherSource = asked && got && asked.source !== got.source
    ? `The link's workload "${fromLink}": ${deviceName(device)} has no ${asked.source} sweep of ${asked.name}; ` +
      `${shown}.` : "";
  state.linkNotes.workload = fromLink && !match
    ? `The link's workload "${fromLink}" was not found for ${deviceName(device)}; ${shown}.` : otherSource;
  showLinkNote();
}

// The search box: only the stored group is replaced; the current choice stays chosen (and listed).
// A newer search aborts an older one; the answer (or failure) of any but the newest is dropped.
export async function searchWorkloads() {
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
export async function workloadRef(key, signal) {
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
