// Keys: which request an answer belongs to. A load answers dataKey (device, workload, coverage); a
// recommendation answers recKey (that and objective, constraints, epochs).

import { checkedCap } from "./cap.js";
import { epochsValue } from "./limits.js";
import { $ } from "./state.js";

export function dataKey() {
  return { device: $("device").value, workload: $("workload").value, confidence: +$("confidence").value };
}

export function recKey() {
  const constraints = {};
  const cap = checkedCap();
  if (cap !== null) constraints[$("cap-kind").value] = cap;
  return Object.assign(dataKey(), { objective: $("objective").value, constraints, epochs: epochsValue() });
}

export const sameKey = (a, b) => JSON.stringify(a) === JSON.stringify(b);

export function safeKey() {
  try { return recKey(); } catch (err) { return null; }
}
