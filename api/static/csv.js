// A profile CSV file (as `jetpredict profile --out` writes it) into rows as POST /v1/profiles takes them.

import { state } from "./state.js";

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

// A profile CSV file -> row objects as POST /v1/profiles takes them: the API takes JSON numbers only, so
// a cell of a column the document types as a number becomes a number; empty cell -> null (unknown).
export function parseProfileCsv(text) {
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
