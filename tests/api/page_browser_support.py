"""What the page's browser tests share: the skip without Chromium, the page's state words, and the helpers
that drive the page's controls and wait for its answers (the service and browser fixtures: ``conftest.py``)."""

from __future__ import annotations

import json
import re

import pytest
import requests

from tools.browser import Browser, find_chromium
from tools.testing import LiveServer

#: Every browser test: slow (a service and a Chromium), skipped with the reason where no Chromium exists.
BROWSER_TESTS = [pytest.mark.slow, pytest.mark.skipif(find_chromium() is None,
                                  reason="no Chromium: apt-get install chromium (as .ci/run does)")]

#: The built-in workload most tests open: AGX Xavier's published ResNet-18 sweep.
WORKLOAD = "builtin:published:resnet18-cifar10"
#: The page has a current answer to its controls.
READY = "document.body.dataset.state === 'ready'"


#: The cap the page asks with: the number box beside the slider holds it exactly.
CAP_VALUE = "+document.getElementById('cap-number').value"


def choose(browser: Browser, element_id: str, value: str, event: str = "change") -> None:
    """Set the control ``element_id`` to ``value`` and fire ``event``, as a user's choice does."""
    browser.evaluate(f"(() => {{ const e = document.getElementById({json.dumps(element_id)}); "
                     f"e.value = {json.dumps(value)}; e.dispatchEvent(new Event({json.dumps(event)})); }})()")


def off_host(server: LiveServer, browser: Browser, since: int) -> list[str]:
    """Requests after the first ``since`` to anything but this service (inline ``data:`` images are no
    request to a host); ``since``: ``len(browser.requests())`` when the test began (the browser is shared)."""
    return [url for url in browser.requests()[since:] if not url.startswith((server.url + "/", "data:"))]


def move_cap(browser: Browser, fraction: float) -> None:
    """Move the cap slider to ``fraction`` of its range, as a user dragging it (even while it is disabled)."""
    browser.evaluate(f"(() => {{ const s = document.getElementById('cap'); "
                     f"s.value = String(+s.min + {fraction} * (+s.max - +s.min)); "
                     "s.dispatchEvent(new Event('input')); })()")


def ready_for(browser: Browser, device: str, timeout_s: float = 90) -> dict:
    """Wait until the page shows a current answer for ``device``; the key of that answer."""
    text = browser.wait_for(f"{READY} && JSON.parse(document.body.dataset.request).device === {json.dumps(device)} "
                            f"&& document.getElementById('device').value === {json.dumps(device)} "
                            "&& document.body.dataset.request", timeout_s)
    return json.loads(text)


def errors_since(browser: Browser, start: int) -> list[str]:
    """Page errors after the first ``start``, less the busy answers the page waits out and asks again
    (503/429 with Retry-After from the service's admission control; Chromium logs each one)."""
    return [e for e in browser.errors()[start:] if not re.search(r"status of (503|429)", e)]


def cap_key(browser: Browser, device: str, kind: str) -> float:
    """The cap of the answer on screen for ``device`` (waited for)."""
    return ready_for(browser, device)["constraints"][kind]


def store(live: LiveServer, workload: str, rows: list[dict]) -> None:
    """Store ``rows`` as the workload ``workload`` (POST /v1/profiles)."""
    r = requests.post(f"{live.url}/v1/profiles", headers={"X-API-Key": live.api_keys.split(",")[0]},
                      timeout=120, json={"rows": [{**row, "workload": workload} for row in rows]})
    assert r.status_code == 201, r.text


def provenance(browser: Browser) -> dict:
    """The provenance list on screen: its data attributes, and its items' text by key under ``items``."""
    return browser.evaluate("(() => { const dl = document.getElementById('provenance'); "
                            "const items = Object.fromEntries(Array.from(dl.querySelectorAll('dd'))"
                            ".map((d) => [d.dataset.key, d.textContent])); return Object.assign({}, dl.dataset, "
                            "{ items }); })()")


#: Evaluated before page.js (or in the page, before the requests it is to hold): POST /v1/recommendations
#: can be held back (``window.__holdRecs``), and POST /v1/predictions of the coverage ``window.__holdModes``
#: names ("all" or "presets"); ``window.__release()`` sends what was held, ``window.__deliver(i)`` the i-th held
#: request alone, and ``window.__deliver(i, status)`` answers it that error status instead. An abort rejects a
#: held request, unless ``window.__keepAborted``: then its answer still comes when delivered, as when the abort
#: lands after the answer is in (a stale answer).
HOLD_HOOK = r"""(() => {
  const real = window.fetch.bind(window);
  window.__held = [];
  window.__holdRecs = false;
  window.__keepAborted = false;
  window.__holdModes = null;
  const holds = (url, options) => (window.__holdRecs && String(url) === "/v1/recommendations")
    || (window.__holdModes !== null && String(url) === "/v1/predictions"
        && JSON.parse(options.body).modes === window.__holdModes);
  window.fetch = (url, options) => {
    if (!holds(url, options)) return real(url, options);
    return new Promise((resolve, reject) => {
      const signal = options && options.signal;
      const keep = window.__keepAborted;
      if (signal && !keep) signal.addEventListener("abort", () => reject(new DOMException("aborted", "AbortError")),
                                                  { once: true });
      const held = { body: options && options.body, sent: false, go: (status) => {
        if (held.sent) return;
        held.sent = true;
        if (status) {
          resolve(new Response(JSON.stringify({ code: status, message: "a held request answered " + status }),
                               { status, headers: { "Content-Type": "application/json" } }));
          return;
        }
        real(url, keep ? Object.assign({}, options, { signal: undefined }) : options).then(resolve, reject);
      } };
      window.__held.push(held);
    });
  };
  window.__deliver = (i, status) => window.__held[i].go(status);
  window.__release = () => { window.__holdRecs = false; for (const held of window.__held) held.go(); };
})();"""
