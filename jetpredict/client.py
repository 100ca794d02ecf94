"""The one Python client of the jetpredict HTTP service (``jetpredict serve``), standard library only.

    from jetpredict.client import Client, NotFound

    with Client("http://127.0.0.1:8080", api_key="my-secret-key") as api:
        api.devices()["devices"]                       # the catalogue
        api.upload_profiles(rows)                      # store + fit (X-API-Key, Idempotency-Key)
        api.recommendations("my-resnet", "min-energy", max_power_w=15)["best"]

Every method is one route of DESIGN.md's HTTP API and returns the JSON document the service answers
(plain dicts and lists; units are in the field names: ``_s``, ``_w``, ``_j``, ``_mhz``). A failure raises
a :class:`ServiceError` subclass built from the service's error body ``{"code", "status", "message",
"errors": {field: [rules]}}``: :class:`BadRequest` (400/406/413/414/415/422, names the field),
:class:`Unauthorized` (401/403), :class:`NotFound` (404), :class:`Conflict` (409), :class:`Overloaded`
(429/503, and a proxy's 502/504; with ``retry_after_s``) and :class:`ConnectionFailed` (no answer at all);
an error body that is not the service's JSON (a proxy's page) is cut to a short text excerpt. Redirects
are not followed (a :class:`ServiceError` naming the ``Location``): the API key and bodies go to
``base_url`` only, and a POST is never resent as a body-less GET.

Retries: a request is tried at most ``retries + 1`` times. Connection failures and 429/502/503/504 answers are
retried with exponential backoff, or after the answer's ``Retry-After`` (s) when it gives one; an answer
that asks for a longer wait than ``max_wait_s`` is raised at once. Uploads carry an ``Idempotency-Key``
(a uuid4 per call, the same on every retry), so the service stores a retried upload once. A request that
may change state and has no key (``delete_workload``, or :meth:`Client.request` with ``safe=False``) is
retried only when it cannot have reached the service (connection refused, name not resolved, 429).

The module imports nothing from the rest of ``jetpredict`` (an architecture test holds it to that).
"""

from __future__ import annotations

import csv
import email.utils
import html
import http.client
import json
import logging
import math
import os
import random
import re
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

__all__ = [
    "API_KEY_ENV", "API_KEY_HEADER", "API_KEY_RULE", "DEFAULT_URL", "IDEMPOTENCY_HEADER", "ROW_TEXT_COLUMNS",
    "SERVICE_KEYS_ENV",
    "BadRequest", "Client", "Conflict", "ConnectionFailed", "NotFound", "Overloaded", "ServiceError",
    "Unauthorized", "default_api_key", "read_rows_csv",
]

log = logging.getLogger("jetpredict.client")

#: The key a client sends (one key).
API_KEY_ENV = "JETPREDICT_API_KEY"
#: The service's comma-separated list of accepted keys: its first key is the default when API_KEY_ENV is
#: unset (client and service on one machine, as in the README's tour).
SERVICE_KEYS_ENV = "JETPREDICT_API_KEYS"
#: The header write routes read the key from (401 without it, 403 when it is wrong).
API_KEY_HEADER = "X-API-Key"
#: The header that makes a retried ``POST /v1/profiles`` store its rows once.
IDEMPOTENCY_HEADER = "Idempotency-Key"
#: Where ``jetpredict serve`` listens by default: api.config's DEFAULT_HOST and DEFAULT_PORT, restated because
#: this module imports only the standard library (tests/test_values_defined_once.py holds them equal).
DEFAULT_URL = "http://127.0.0.1:8080"
DEFAULT_TIMEOUT_S = 30.0
DEFAULT_RETRIES = 3
DEFAULT_BACKOFF_S = 0.5
DEFAULT_MAX_WAIT_S = 30.0

_JSON = "application/json"


#: What an API key may hold: the service's rule (api.config.API_KEY_RULE, which a standard-library client
#: cannot import; a test holds the two equal). Only ASCII reaches the service as the key it was configured as.
API_KEY_RULE = "printable ASCII: visible characters '!' to '~', no spaces or control characters"
#: A character that breaks :data:`API_KEY_RULE` (api.config.API_KEY_BREAK; held equal by the same test).
_API_KEY_BREAK = re.compile(r"[^!-~]")


def _default_api_key_from() -> tuple[str | None, str]:
    """The default key and the variable it came from (:func:`default_api_key`)."""
    key = os.environ.get(API_KEY_ENV, "").strip()
    if key:
        return key, API_KEY_ENV
    listed = [k.strip() for k in os.environ.get(SERVICE_KEYS_ENV, "").split(",") if k.strip()]
    return (listed[0] if listed else None), SERVICE_KEYS_ENV


def default_api_key() -> str | None:
    """``$JETPREDICT_API_KEY``, else the first key of ``$JETPREDICT_API_KEYS``, else None."""
    return _default_api_key_from()[0]


#: Profile-row columns that hold text (models/profile_rows.py; a test holds the two together): every other
#: column of a profile CSV holds numbers, which JSON rows carry as JSON numbers.
ROW_TEXT_COLUMNS = frozenset(("device", "workload", "mode", "source", "power_meter", "power_null_reason",
                              "cpu_package_null_reason", "accelerator", "data_source", "complexity_null_reason"))


def _csv_cell(column: str, text: str | None) -> str | int | float | None:
    """A CSV cell as JSON: empty -> None (unknown), a text column's cell as it is, a number as a number
    (an int when written as one). Text that is no finite number stays text, so the service's 422 names the
    cell and the rule rather than this reader guessing."""
    if text is None or text.strip() == "":
        return None
    if column in ROW_TEXT_COLUMNS:
        return text
    try:
        number = float(text)
    except ValueError:
        return text
    if not math.isfinite(number):
        return text
    try:
        return int(text)
    except ValueError:
        return number


def read_rows_csv(path: str | Path) -> list[dict[str, str | int | float | None]]:
    """Profile rows of a CSV file as JSON objects for :meth:`Client.upload_profiles`: numeric columns as
    numbers (the service takes JSON numbers only, as its document types them), text columns
    (:data:`ROW_TEXT_COLUMNS`) as text, an empty cell as None = unknown. A byte-order mark (a spreadsheet's
    "CSV UTF-8") is dropped, so the first column is ``device``, not ``\\ufeffdevice``."""
    with Path(path).open(newline="", encoding="utf-8-sig") as f:
        return [{k: _csv_cell(k, v) for k, v in row.items() if k is not None} for row in csv.DictReader(f)]


# ---------------------------------------------------------------------------------------------- errors

class ServiceError(Exception):
    """The service refused a request, or gave no usable answer.

    ``status``: the HTTP status (None when nothing was answered); ``name``: its name as the service gave
    it (``"Unprocessable Entity"``); ``message``: the service's message; ``errors``: ``{field: [rules]}``
    as the service gave them; ``field``: the first field at fault (None when none is named);
    ``retry_after_s``: the answer's ``Retry-After`` in s (None without one); ``method``/``url``: the
    request; ``attempts``: how many times it was sent.
    """

    def __init__(self, message: str, *, status: int | None = None, name: str | None = None,
                 errors: Mapping[str, Sequence[str]] | None = None, retry_after_s: float | None = None,
                 method: str = "", url: str = "", attempts: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.name = name
        self.errors = {str(k): [str(m) for m in v] for k, v in (errors or {}).items()}
        self.field = next(iter(self.errors), None)
        self.retry_after_s = retry_after_s
        self.method = method
        self.url = url
        self.attempts = attempts

    @property
    def detail(self) -> str:
        """The service's message, with its first field and rule when the message does not say them (the
        message may name an item as ``rows[3]`` where the field is ``rows.3``: the rule's text then decides)."""
        rules = self.errors.get(self.field or "")
        if rules and self.field not in self.message and rules[0] not in self.message:
            return f"{self.message} ({self.field}: {rules[0]})"
        return self.message

    def __str__(self) -> str:
        detail = self.detail
        if self.retry_after_s is not None:
            detail = f"{detail}; retry after {self.retry_after_s:g} s"
        tries = f" (after {self.attempts} attempts)" if self.attempts > 1 else ""
        if self.status is None:
            return f"{self.method} {self.url} failed{tries}: {detail}"
        return f"{self.method} {self.url} answered {self.status}{tries}: {detail}"


class BadRequest(ServiceError):
    """400/406/413/414/415/422: the request is wrong; ``field`` names what (``rows.3.gpu_mhz``)."""


class Unauthorized(ServiceError):
    """401 (no ``X-API-Key``) or 403 (a key the service does not hold)."""


class NotFound(ServiceError):
    """404: no such device, stored workload or route."""


class Conflict(ServiceError):
    """409: valid rows that clash with what is stored, or an ``Idempotency-Key`` reused for another body."""


class Overloaded(ServiceError):
    """429 (rate limited), 503 (busy, database unreachable, store cannot write), or a proxy's 502/504 (the
    service behind it down or slow): retry after ``retry_after_s`` s, when the answer gives one."""


class ConnectionFailed(ServiceError):
    """No answer: refused, unresolvable, reset, or no answer within ``timeout_s``. ``status`` is None."""

    def __init__(self, message: str, *, before_sending: bool = False, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        #: True when the request cannot have reached the service (refused, name not resolved).
        self.before_sending = before_sending


_STATUS_CLASSES: dict[int, type[ServiceError]] = {
    **dict.fromkeys((400, 406, 413, 414, 415, 422), BadRequest), 401: Unauthorized, 403: Unauthorized,
    404: NotFound, 409: Conflict, **dict.fromkeys((429, 502, 503, 504), Overloaded),
}

#: The most characters of an error body that is not the service's JSON (a proxy's HTML page) kept in a message.
MAX_EXCERPT_CHARS = 120


def _text_excerpt(body: bytes) -> str:
    """A short excerpt of a non-JSON body as text: markup, scripts and styles dropped, whitespace collapsed."""
    text = body.decode("utf-8", errors="replace")
    text = re.sub(r"(?is)<(script|style)\b.*?</\1\s*>|<[^>]*>", " ", text)
    text = " ".join(html.unescape(text).split())
    return text if len(text) <= MAX_EXCERPT_CHARS else text[:MAX_EXCERPT_CHARS - 3] + "..."


def parse_retry_after(value: str | None) -> float | None:
    """``Retry-After`` (delta seconds, or an HTTP date) as s from now; None when absent or unreadable."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        seconds = (when - datetime.now(timezone.utc)).total_seconds()
    return max(0.0, seconds) if math.isfinite(seconds) else None


def error_from_answer(status: int, body: bytes, headers: Mapping[str, str] | http.client.HTTPMessage,
                      method: str = "", url: str = "", reason: str = "") -> ServiceError:
    """The :class:`ServiceError` subclass for an error answer (its JSON error body, or its text)."""
    name, message, errors = reason or None, "", {}
    try:
        document = json.loads(body.decode("utf-8")) if body else None
    except (UnicodeDecodeError, ValueError):
        document = None
    if isinstance(document, Mapping):
        name = str(document.get("status") or name or "") or None
        message = str(document.get("message") or "")
        raw = document.get("errors")
        if isinstance(raw, Mapping):
            errors = {str(k): (v if isinstance(v, list) else [v]) for k, v in raw.items()}
    elif body:
        excerpt = _text_excerpt(body)
        message = f"{reason or f'HTTP {status}'} (not a jetpredict error body{': ' + excerpt if excerpt else ''})"
    if 300 <= status < 400:
        location = headers.get("Location")
        message = (f"redirected to {location}" if location else "redirected, without a Location") + (
            ", not followed: the client sends its API key and bodies to base_url only; give the service's own "
            "URL as base_url")
    cls = _STATUS_CLASSES.get(status, ServiceError)
    return cls(message or name or f"HTTP {status}", status=status, name=name, errors=errors,
               retry_after_s=parse_retry_after(headers.get("Retry-After")), method=method, url=url)


# ---------------------------------------------------------------------------------------------- client

def _jsonable(value: Any) -> Any:
    """A copy ``json.dumps`` takes: NaN/inf -> None (unknown), numpy scalars and arrays -> Python."""
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, str | bool | int) or value is None:
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    for convert in ("tolist", "item"):  # numpy scalars and arrays, without importing numpy
        method = getattr(value, convert, None)
        if callable(method):
            return _jsonable(method())
    return value


def _workload_ref(workload: str | Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A request's workload: an id -> ``{"id"}``; rows -> ``{"rows"}``; ``{"id"}``/``{"rows"}`` as given."""
    if isinstance(workload, str):
        return {"id": workload}
    if isinstance(workload, Mapping):
        return dict(workload)
    if isinstance(workload, Sequence):
        return {"rows": list(workload)}
    raise TypeError(f"workload must be a stored id, a list of profile rows or a workload object, "
                    f"not {type(workload).__name__}")


def _segment(value: str) -> str:
    return urllib.parse.quote(str(value), safe="")


class Client:
    """A client of one jetpredict service at ``base_url`` (e.g. ``http://127.0.0.1:8080``).

    ``api_key``: sent as ``X-API-Key`` on every request (writes need it; with it, inline workloads may
    hold more rows); None takes :func:`default_api_key`, ``""`` sends none. ``timeout_s``: per attempt,
    s. ``retries``: further attempts after the first (0: none). ``backoff_s``: the first wait between
    attempts without ``Retry-After``, s, doubled each time (with jitter). ``max_wait_s``: the longest
    wait, s; a ``Retry-After`` above it is raised as :class:`Overloaded` at once. ``headers``: sent with
    every request. No connection is kept between requests: a client may be shared by threads, and used
    as a context manager for symmetry with other clients.
    """

    def __init__(self, base_url: str = DEFAULT_URL, api_key: str | None = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S, retries: int = DEFAULT_RETRIES,
                 backoff_s: float = DEFAULT_BACKOFF_S, max_wait_s: float = DEFAULT_MAX_WAIT_S,
                 headers: Mapping[str, str] | None = None) -> None:
        parsed = urllib.parse.urlsplit(str(base_url))
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ValueError(f"base_url must be an http:// or https:// URL of the service, got {base_url!r}")
        if not (timeout_s > 0 and math.isfinite(timeout_s)):
            raise ValueError(f"timeout_s must be a finite number of seconds > 0, got {timeout_s!r}")
        if not (isinstance(retries, int) and retries >= 0):
            raise ValueError(f"retries must be a whole number >= 0, got {retries!r}")
        if not (backoff_s >= 0 and max_wait_s >= 0):
            raise ValueError(f"backoff_s and max_wait_s must be >= 0, got {backoff_s!r}, {max_wait_s!r}")
        self.base_url = str(base_url).rstrip("/")
        default_key, variable = _default_api_key_from()
        self.api_key = default_key if api_key is None else (api_key or None)
        found = _API_KEY_BREAK.search(self.api_key or "")
        if found:
            # A bad key fails here in words, not as a UnicodeEncodeError or a 403 on the first request.
            named = (f"${variable}" if api_key is None
                     else f"api_key (the key in ${variable})" if api_key == default_key else "api_key")
            raise ValueError(f"{named} must be {API_KEY_RULE} (an HTTP header carries nothing else "
                             f"intact); it has U+{ord(found.group()):04X} at character {found.start() + 1}")
        self.timeout_s = float(timeout_s)
        self.retries = retries
        self.backoff_s = float(backoff_s)
        self.max_wait_s = float(max_wait_s)
        self.headers = dict(headers or {})
        self._opener = urllib.request.build_opener(_NoRedirects)

    def __repr__(self) -> str:
        return f"Client({self.base_url!r}, api_key={'***' if self.api_key else None})"

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Nothing to release (no connection is kept); here so that a client can be closed like others."""

    # -------------------------------------------------------------------------------------- routes

    def health(self) -> dict[str, Any]:
        """``GET /healthz``: ``{"status": "ok"|"degraded", "version", "database", "store", "devices"}``;
        a degraded service (503) is answered too, not raised."""
        return self.request("GET", "/healthz", accept=(503,), retry=False)

    def devices(self) -> dict[str, Any]:
        """``GET /v1/devices``: ``{"devices": [{"id", "name", "specs", "knob_ranges", ...}]}``."""
        return self.request("GET", "/v1/devices")

    def power_modes(self, device: str, space: str = "presets", limit: int | None = None,
                    offset: int = 0) -> dict[str, Any]:
        """``GET /v1/devices/{device}/power-modes``: one page ``{"total", "limit", "offset", "modes"}`` of the
        presets (``space="presets"``) or of every custom mode (``"all"``); clocks in MHz."""
        return self.request("GET", f"/v1/devices/{_segment(device)}/power-modes",
                            params={"space": space, "limit": limit, "offset": offset or None})

    def iter_power_modes(self, device: str, space: str = "all", page_size: int = 10_000
                         ) -> Iterator[dict[str, Any]]:
        """Every mode of ``space`` on ``device``, page after page (by default the service's largest page,
        ``api.schemas.MAX_POWER_MODES_PAGE``: this module imports only the standard library, so
        tests/test_values_defined_once.py holds the two equal)."""
        offset = 0
        while True:
            page = self.power_modes(device, space, limit=page_size, offset=offset)
            yield from page["modes"]
            offset += len(page["modes"])
            if not page["modes"] or offset >= page["total"]:
                return

    def reference_workloads(self, device: str | None = None, source: str | None = None) -> dict[str, Any]:
        """``GET /v1/reference-workloads``: the built-in workloads ``{"workloads": [{"device", "workload",
        "source", "citation", "modes"}]}`` (only ``device``'s / ``source``'s when given)."""
        return self.request("GET", "/v1/reference-workloads", params={"device": device, "source": source})

    def reference_workload(self, device: str, workload: str, source: str | None = None) -> dict[str, Any]:
        """``GET /v1/reference-workloads/{device}/{workload}``: a built-in workload with its ``rows``, ready
        to send as an inline workload."""
        return self.request("GET", f"/v1/reference-workloads/{_segment(device)}/{_segment(workload)}",
                            params={"source": source})

    def upload_profiles(self, rows: Sequence[Mapping[str, Any]], idempotency_key: str | None = None
                        ) -> dict[str, Any]:
        """``POST /v1/profiles`` (API key): store profile rows and fit their workloads; 201 ``{"workload_id",
        "rows_stored", "rows_total", "revision", "workloads": [...], ...}``.

        Sent with ``Idempotency-Key`` (``idempotency_key``, else a new uuid4), the same on every retry: a
        retry of an upload that was stored is answered with the first answer and stores nothing. Reuse a
        key only for the same rows (another body under a used key is a :class:`Conflict`).
        """
        key = idempotency_key or str(uuid.uuid4())
        return self.request("POST", "/v1/profiles", json={"rows": list(rows)},
                            headers={IDEMPOTENCY_HEADER: key}, safe=True)

    def workloads(self, search: str | None = None, limit: int | None = None, offset: int = 0
                  ) -> dict[str, Any]:
        """``GET /v1/workloads``: a page ``{"total", "limit", "offset", "workloads"}`` of stored workloads,
        sorted by id (only ids containing ``search`` when given)."""
        return self.request("GET", "/v1/workloads",
                            params={"search": search, "limit": limit, "offset": offset or None})

    def workload(self, workload_id: str) -> dict[str, Any]:
        """``GET /v1/workloads/{id}``: one stored workload, its fit's provenance and its ``rows``."""
        return self.request("GET", f"/v1/workloads/{_segment(workload_id)}")

    def delete_workload(self, workload_id: str) -> None:
        """``DELETE /v1/workloads/{id}`` (API key): the workload and all its rows."""
        self.request("DELETE", f"/v1/workloads/{_segment(workload_id)}", safe=False)

    def predictions(self, workload: str | Mapping[str, Any] | Sequence[Mapping[str, Any]], *,
                    device: str | None = None, modes: str | Sequence[Mapping[str, Any]] = "presets",
                    epochs: int | None = None, confidence: float | None = None, **fields: Any) -> dict[str, Any]:
        """``POST /v1/predictions``: epoch time (s), power (W) and energy (J) with intervals per mode.

        ``workload``: a stored id, a list of profile rows (inline) or ``{"id"}``/``{"rows"}``; ``device``:
        default the workload's own; ``modes``: ``"presets"``, ``"all"`` or mode objects (``cpu_cores``,
        ``cpu_mhz``, ``gpu_mhz``, ``emc_mhz``); ``epochs``: adds totals for that many epochs;
        ``confidence``: coverage of the intervals (server default 0.9). ``fields``: further request
        fields (``layout="columns"``). Answers ``{"device", "reference_source", ..., "predictions"}``.
        """
        body = {"device": device, "workload": _workload_ref(workload),
                "modes": modes if isinstance(modes, str) else [dict(m) for m in modes],
                "epochs": epochs, "confidence": confidence, **fields}
        return self.request("POST", "/v1/predictions", json=_drop_none(body), safe=True)

    def recommendations(self, workload: str | Mapping[str, Any] | Sequence[Mapping[str, Any]],
                        objective: str, *, device: str | None = None,
                        max_power_w: float | None = None, max_epoch_time_s: float | None = None,
                        epochs: int | None = None, confidence: float | None = None,
                        **fields: Any) -> dict[str, Any]:
        """``POST /v1/recommendations``: the best mode for ``objective`` (``"min-time"`` or ``"min-energy"``)
        whose upper bounds meet ``max_power_w`` (W) and ``max_epoch_time_s`` (s), and the time-energy
        Pareto front: ``{"best": {...} | None, "pareto": [...], "feasible", ...}``."""
        constraints = _drop_none({"max_power_w": max_power_w, "max_epoch_time_s": max_epoch_time_s})
        body = {"device": device, "workload": _workload_ref(workload), "objective": objective,
                "constraints": constraints, "epochs": epochs, "confidence": confidence, **fields}
        return self.request("POST", "/v1/recommendations", json=_drop_none(body), safe=True)

    def fleet_plans(self, workload: str | Mapping[str, Any] | Sequence[Mapping[str, Any]],
                    clients: Sequence[Mapping[str, str]], deadline_s: float, *, epochs: int | None = None,
                    confidence: float | None = None, **fields: Any) -> dict[str, Any]:
        """``POST /v1/fleet-plans``: per client (``[{"id", "device"}]``) the mode meeting the round deadline
        (``deadline_s``, s, for ``epochs`` local epochs) with least energy: ``{"feasible",
        "total_energy_j", "clients": [{"id", "device", "mode", "epoch_time_s", ...}], ...}``."""
        for i, c in enumerate(clients):
            if not isinstance(c, Mapping):  # dict() of a device name failed naming neither argument nor shape
                raise TypeError(f'clients[{i}] must be a mapping {{"id": ..., "device": ...}}, got {c!r}')
        body = {"workload": _workload_ref(workload), "deadline_s": deadline_s, "epochs": epochs,
                "clients": [dict(c) for c in clients], "confidence": confidence, **fields}
        return self.request("POST", "/v1/fleet-plans", json=_drop_none(body), safe=True)

    def openapi(self) -> dict[str, Any]:
        """``GET /openapi.json``: the service's OpenAPI document."""
        return self.request("GET", "/openapi.json")

    # ---------------------------------------------------------------------------------- transport

    def url(self, path: str, params: Mapping[str, Any] | None = None) -> str:
        """``base_url + path`` with the query ``params`` that are not None."""
        query = urllib.parse.urlencode({k: v for k, v in (params or {}).items() if v is not None})
        return f"{self.base_url}{path}{'?' + query if query else ''}"

    def request(self, method: str, path: str, *, json: Any = None, params: Mapping[str, Any] | None = None,
                headers: Mapping[str, str] | None = None, safe: bool | None = None, retry: bool = True,
                accept: Sequence[int] = ()) -> Any:
        """Send one request (with retries) and return its JSON answer (None for an empty one).

        ``safe``: whether repeating the request is harmless (default: GET/HEAD only); an unsafe request is
        retried only when it cannot have reached the service. ``accept``: error statuses whose body is
        returned rather than raised. Raises a :class:`ServiceError` subclass.
        """
        method = method.upper()
        safe = method in ("GET", "HEAD") if safe is None else safe
        url = self.url(path, params)
        data = None if json is None else _dumps(json)
        sent = {"Accept": _JSON, "User-Agent": "jetpredict-client", **self.headers}
        if self.api_key:
            sent[API_KEY_HEADER] = self.api_key
        if data is not None:
            sent["Content-Type"] = _JSON
        sent.update(headers or {})
        attempts = 1 + (self.retries if retry else 0)
        for attempt in range(1, attempts + 1):
            try:
                return self._once(method, url, data, sent, accept)
            except ServiceError as exc:
                exc.attempts = attempt
                wait = self._wait(exc, attempt, safe)
                if attempt == attempts or wait is None:
                    raise
                log.info("%s; retrying in %.2f s (attempt %d of %d)", exc, wait, attempt + 1, attempts)
                time.sleep(wait)
        raise AssertionError("unreachable")  # pragma: no cover

    def _wait(self, exc: ServiceError, attempt: int, safe: bool) -> float | None:
        """Seconds to wait before trying ``exc``'s request again, or None when it must not be retried."""
        if isinstance(exc, Overloaded):
            if not (safe or exc.status == 429):  # a 429 was refused before anything ran
                return None
            if exc.retry_after_s is not None:
                return exc.retry_after_s if exc.retry_after_s <= self.max_wait_s else None
        elif not (isinstance(exc, ConnectionFailed) and (safe or exc.before_sending)):
            return None
        return min(self.max_wait_s, self.backoff_s * 2 ** (attempt - 1)) * random.uniform(0.5, 1.0)

    def _once(self, method: str, url: str, data: bytes | None, headers: Mapping[str, str],
              accept: Sequence[int]) -> Any:
        request = urllib.request.Request(url, data=data, method=method, headers=dict(headers))
        try:
            with self._opener.open(request, timeout=self.timeout_s) as response:
                status, body = response.status, response.read()
        except urllib.error.HTTPError as err:
            try:
                body = err.read()
            except (OSError, http.client.HTTPException):
                body = b""
            finally:
                err.close()
            if err.code not in accept:
                raise error_from_answer(err.code, body, err.headers, method, url, str(err.reason)) from None
            status = err.code
        except urllib.error.URLError as err:
            # urllib raises URLError only while connecting and sending: the service has not run anything.
            raise ConnectionFailed(str(err.reason), before_sending=True, method=method, url=url) from None
        except (OSError, http.client.HTTPException) as err:  # reset, closed or timed out while answering
            reason = f"no answer within {self.timeout_s:g} s" if isinstance(err, TimeoutError) else (
                str(err) or type(err).__name__)
            raise ConnectionFailed(reason, method=method, url=url) from None
        if not body:
            return None
        try:
            return json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise ServiceError(f"the answer is not JSON: {body[:200]!r}", status=status, method=method,
                               url=url) from None


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """Follows no redirect: urllib's would resend X-API-Key to any host and turn a POST into a GET without
    its body; the 3xx answer is raised (:func:`error_from_answer`) instead."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _drop_none(body: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if v is not None}


def _dumps(value: Any) -> bytes:
    try:
        return json.dumps(_jsonable(value), allow_nan=False, separators=(",", ":")).encode("utf-8")
    except TypeError as exc:
        raise TypeError(f"the request body is not JSON: {exc}") from None
