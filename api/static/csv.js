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

// The file's non-empty lines, each with its line number in the file (1-based).
function csvLines(text) {
  return text.split(/\r?\n/).map((line, i) => ({ line, at: i + 1 })).filter(({ line }) => line.length > 0);
}

// A profile CSV file -> {rows: row objects as POST /v1/profiles takes them, lines: the file line of each
// row (1-based; blank lines are skipped, so rows.N is not always line N + 2)}. The API takes JSON numbers
// only, so a cell of a column the document types as a number becomes a number; empty cell -> null (unknown).
export function parseProfileCsv(text) {
  const lines = csvLines(text.replace(/^\uFEFF/, ""));
  if (lines.length < 2) throw new Error("the file has no data rows");
  const header = splitQuoted(lines[0].line).map((h) => h.trim());
  const rows = lines.slice(1).map(({ line }) => {
    const cells = splitQuoted(line);
    const row = {};
    header.forEach((h, i) => { row[h] = csvValue(h, cells[i]); });
    return row;
  });
  return { rows, lines: lines.slice(1).map(({ at }) => at) };
}

// An error of the service about uploaded rows, with each row it names (rows.1.epoch_time_s) also named by
// its line in the CSV file the user chose: "line 3 (rows.1.epoch_time_s)".
export function withCsvLines(message, lines) {
  return message.replace(/\brows\.(\d+)((?:\.[A-Za-z_]\w*)*)/g, (said, index, rest) => {
    const at = lines[Number(index)];
    return at === undefined ? said : `line ${at} (rows.${index}${rest})`;
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
