// Requests to the service: each within state.requestTimeoutMs, sent again when the service says when
// (503/429 with Retry-After), and failing with an error that says what happened in words.

import { fmt } from "./format.js";
import { $, state } from "./state.js";

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

export async function api(path, options, attempt) {
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

export function postJson(path, payload, accept, headers, signal) {
  return api(path, {
    method: "POST",
    headers: Object.assign({ "Content-Type": "application/json", Accept: accept || "application/json" },
      headers || {}),
    body: JSON.stringify(payload),
    signal,
  });
}
