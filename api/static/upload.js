// Upload of a profile CSV (POST /v1/profiles), then the stored workload loaded.

import { parseProfileCsv, withCsvLines } from "./csv.js";
import { postJson } from "./http.js";
import { beginLoad, failFor, loadAll } from "./load.js";
import { $, drop, state } from "./state.js";
import { loadWorkloads } from "./workloads.js";

// One upload at a time: the button is disabled until its answer is in. Each has a sequence number, and
// the answer (or failure) of any but the newest is dropped, so an older one cannot overwrite what a
// newer one said or chose.
export async function upload() {
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
    const { rows, lines } = parseProfileCsv(await file.text());
    if (seq !== state.uploadSeq) { drop(); return; }
    out.textContent = `uploading ${rows.length} rows…`;
    const result = await postJson("/v1/profiles", { rows }, "application/json", { "X-API-Key": key })
      .catch((err) => {  // the user chose a CSV file: its rows are named by their lines in it too
        err.message = withCsvLines(err.message, lines);
        throw err;
      });
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
