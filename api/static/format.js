// Numbers and intervals as the page writes them for people.

// Numbers for people: 4 significant digits, no exponent, no trailing zeros (1190.4, 6518, 0.2531).
export function fmt(v, digits) {
  if (v === null || v === undefined || Number.isNaN(+v)) return "–";
  const x = +v;
  if (Math.abs(x) >= Math.pow(10, digits || 4)) return String(Math.round(x));
  const text = x.toPrecision(digits || 4);
  return text.includes("e") ? String(x) : (text.includes(".") ? text.replace(/\.?0+$/, "") : text);
}
export const interval = (v, lo, hi, unit) => `${fmt(v)} ${unit}` +
  (lo === null || lo === undefined || Number.isNaN(lo) ? "" : `  [${fmt(lo, 3)}, ${fmt(hi, 3)}]`);
export const percent = (share) => `${fmt(share * 100, 3)}%`;
