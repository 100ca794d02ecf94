"""Service settings: defaults, overridden by ``JETPREDICT_*`` environment variables, overridden by a dict.

Every setting has one name used three ways: ``DATA_DIR`` is the key in ``create_app({...})``, the
environment variable ``JETPREDICT_DATA_DIR``, and (where it makes sense) a ``jetpredict serve`` flag.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path

from jetpredict.models.catalogue import MODE_FIELDS, device_ids
from jetpredict.models.errors import InputError
from jetpredict.predictor.limits import DIRECT_MODES, MAX_CLIENTS, MAX_MODES, OBJECTIVES

ENV_PREFIX = "JETPREDICT_"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080

# -- the body limit's floor --------------------------------------------------------------------------
# The request limits that size a body are defined here (not in api.query_schemas or api.storage, which
# import them): the default body limit is derived from them, and `jetpredict --help` must not load SQLAlchemy.
#: Longest workload id (characters): the width of every workload id column (``api.storage``). Widening it
#: needs a migration of deployed databases; the HTTP schemas take their limit from here.
MAX_WORKLOAD_ID_CHARS = 200
#: Longest id of a fleet client (characters).
MAX_CLIENT_ID_CHARS = 200
#: Longest label of a mode in a request (characters): the schema, its fast path and the OpenAPI document.
MAX_MODE_LABEL_CHARS = 100
#: Fields of the power-modes listing a mode object in a request may carry beside its label and knobs
#: (``api.query_schemas.ModeInSchema``; typed, not used), so a listed mode can be sent back as it came.
LISTED_MODE_FIELDS = ("nvpmodel_id", "power_budget_w", "gpu_share")
#: A number as long as Python's JSON writer makes one (``-2.2250738585072014e-308``: 24 characters).
_LONGEST_NUMBER = -2.2250738585072014e-308


def _json_bytes(value: object) -> int:
    """Bytes of ``value`` as ``json.dumps`` writes it by default (what ``requests``' ``json=`` sends)."""
    return len(json.dumps(value).encode())


def _with_items(head: dict, key: str, item: dict, count: int) -> int:
    """Bytes of ``head`` with a list of ``count`` copies of ``item`` under ``key`` (one ", " apart)."""
    return _json_bytes({**head, key: [item]}) + (count - 1) * (_json_bytes(item) + len(", "))


def largest_query_bodies() -> dict[str, int]:
    """Route -> bytes of the largest body its schema accepts (api.query_schemas) with the workload given by
    id: every field at its longest, text as ASCII (1 byte a character), every number 24 characters.

    Inline profile rows are left out: 10,000 rows whose text cells hold their 10,000 characters are
    hundreds of MB, far past any sensible limit (a row's cells are limited in models.profile_rows)."""
    device = max(device_ids(), key=len)
    workload = {"id": "x" * MAX_WORKLOAD_ID_CHARS}
    n = _LONGEST_NUMBER
    fleet = {"workload": workload, "deadline_s": n, "epochs": n, "confidence": n}
    client = {"id": "x" * MAX_CLIENT_ID_CHARS, "device": device}
    prediction = {"device": device, "workload": workload, "epochs": n, "confidence": n, "layout": "columns"}
    mode = {"mode": "x" * MAX_MODE_LABEL_CHARS, **dict.fromkeys((*MODE_FIELDS, *LISTED_MODE_FIELDS), n)}
    recommendation = {"device": device, "workload": workload, "objective": max(OBJECTIVES, key=len),
                      "constraints": {"max_power_w": n, "max_epoch_time_s": n}, "epochs": n, "confidence": n}
    return {"/v1/fleet-plans": _with_items(fleet, "clients", client, MAX_CLIENTS),
            "/v1/predictions": _with_items(prediction, "modes", mode, MAX_MODES),
            "/v1/recommendations": _json_bytes(recommendation)}


#: The route of the largest valid query, and the fewest body bytes that let every valid query through
#: (largest_query_bodies).
LARGEST_QUERY_ROUTE, MIN_BODY_BYTES = max(largest_query_bodies().items(), key=lambda item: item[1])
_MIB = 1024 * 1024
#: The default body limit: MIN_BODY_BYTES up to a whole MiB (room for a client's indented JSON).
DEFAULT_MAX_BODY_BYTES = -(-MIN_BODY_BYTES // _MIB) * _MIB
DEFAULT_WORKERS = 2
DEFAULT_THREADS = 4  # gunicorn threads per worker
#: gunicorn (``jetpredict serve``) drops a client whose request head has not all come this long after its
#: connection was accepted (kept alive: after its next byte), whose body pauses this long with no byte, or
#: who reads none of its answer while a send waits this long for room (api.gunicorn_worker): else each such
#: client holds a thread for as long as it keeps its socket open. A
#: head is a few hundred bytes sent at once; 10 s covers TCP's retransmits of three lost segments in a row
#: (1 + 2 + 4 s, RFC 6298's doubling from 1 s). A body still coming, however slowly, is never cut: the limit
#: is a pause, not a total (s).
DEFAULT_REQUEST_READ_TIMEOUT_S = 10
#: The SQLite folder when none is given, relative to the folder ``serve`` starts in.
DEFAULT_DATA_DIR = "data"
#: The SQLite database's file name in the data folder.
SQLITE_FILE_NAME = "jetpredict.sqlite"
DEFAULT_RATE_LIMIT = "600/minute;50/second"
DEFAULT_RATE_LIMIT_ALL_MODES = "30/minute"
RATE_LIMIT_OFF = ("off", "none", "0", "false")
DEFAULT_INLINE_ROWS_WITHOUT_KEY = 2_000
#: A fit over more stored and uploaded rows than this is heavy work (0.013 CPU-s at 1,000 rows, 0.088 at
#: 10,000: bench/results/fit_scaling.md).
DEFAULT_HEAVY_FIT_ROWS = 2_000
#: Fleet plans of more clients than this are heavy work (api.heavy): ~0.1 ms per client, MBs of JSON.
HEAVY_CLIENTS = 500
#: A mode list longer than this is heavy work (api.heavy) and counts against RATE_LIMIT_ALL_MODES, as
#: ``"all"`` does (its cost: predictor.limits.DIRECT_MODES). Under the default RATE_LIMIT (600/minute)
#: shorter lists reach at most 600,000 modes a minute, below ``"all"`` under its own limit (30 x 29,232).
HEAVY_MODES = DIRECT_MODES


def _split(value: str | list | tuple) -> tuple[str, ...]:
    if isinstance(value, list | tuple):
        return tuple(str(v).strip() for v in value if str(v).strip())
    return tuple(v.strip() for v in str(value).split(",") if v.strip())


#: What an API key may hold: WSGI reads the X-API-Key header as latin-1 and clients write UTF-8 or latin-1,
#: so only ASCII arrives as the key configured, and spaces and control characters are trimmed or refused on
#: the way (jetpredict.client restates the rule; tests/test_values_defined_once.py holds the two equal).
API_KEY_RULE = "printable ASCII: visible characters '!' to '~', no spaces or control characters"
#: The characters a header token (an API key, an Idempotency-Key) may hold: visible ASCII.
HEADER_TOKEN_CHARS = "!-~"
#: A character that breaks :data:`API_KEY_RULE`.
API_KEY_BREAK = re.compile(f"[^{HEADER_TOKEN_CHARS}]")


def api_key_fault(key: str) -> str | None:
    """Where ``key`` breaks :data:`API_KEY_RULE` (the first such character's code point and 1-based position,
    never the key: it is a secret), or None when it keeps it."""
    found = API_KEY_BREAK.search(key)
    return None if found is None else f"U+{ord(found.group()):04X} at character {found.start() + 1}"


def _api_keys(value: str | list | tuple) -> tuple[str, ...]:
    """The listed keys, each checked against :data:`API_KEY_RULE` (any other key would answer 403 to every
    write); the message never shows a key."""
    keys = _split(value)
    if not keys and isinstance(value, str) and value != "":  # "" is unset: serve makes a key for the run
        raise InputError(f"{ENV_PREFIX}API_KEYS is set but holds no key: give comma-separated keys, or leave it "
                         "unset (or empty) for a key made for one run", "API_KEYS")
    for number, key in enumerate(keys, 1):
        fault = api_key_fault(key)
        if fault:
            raise InputError(f"{ENV_PREFIX}API_KEYS: key {number} has {fault}; each comma-separated key must be "
                             f"{API_KEY_RULE}", "API_KEYS")
    return keys


def empty_api_key_entries(value: str) -> str | None:
    """What ``serve`` warns of the empty entries of an ``API_KEYS`` value that holds keys (``a,,b``, a comma at
    an end): they are dropped, the keys kept (a slip of the pen, not a key). None where there are none."""
    entries = [entry.strip() for entry in value.split(",")]
    empty = [str(number) for number, entry in enumerate(entries, 1) if not entry]
    if not empty or len(empty) == len(entries):
        return None
    return (f"warning: {ENV_PREFIX}API_KEYS: entry {', '.join(empty)} of {len(entries)} is empty and dropped; "
            f"{len(entries) - len(empty)} key(s) kept")


@dataclass(frozen=True)
class Settings:
    """Resolved settings of one app. Units: bytes, seconds; ``API_KEYS`` are plaintext keys."""

    DATA_DIR: Path = field(default_factory=lambda: Path.cwd() / DEFAULT_DATA_DIR)
    DATABASE_URL: str = ""  # empty = SQLite file ``DATA_DIR/jetpredict.sqlite``
    API_KEYS: tuple[str, ...] = ()
    MAX_BODY_BYTES: int = DEFAULT_MAX_BODY_BYTES
    HOST: str = DEFAULT_HOST
    PORT: int = DEFAULT_PORT
    WORKERS: int = DEFAULT_WORKERS
    THREADS: int = DEFAULT_THREADS
    REQUEST_READ_TIMEOUT_S: int = DEFAULT_REQUEST_READ_TIMEOUT_S  # gunicorn only
    CORS_ORIGINS: tuple[str, ...] = ()  # empty = CORS off
    MODEL_CACHE_SIZE: int = 64  # fitted workload models kept in memory per process
    # Per-client limits (flask-limiter syntax, ";"-separated) on the costly POST routes, and on requests
    # for modes "all"; "off" turns limiting off (tests and loopback benchmarks).
    RATE_LIMIT: str = DEFAULT_RATE_LIMIT
    RATE_LIMIT_ALL_MODES: str = DEFAULT_RATE_LIMIT_ALL_MODES
    RATE_LIMIT_STORAGE_URL: str = "memory://"  # per worker; redis://... shares counters across processes
    # Proxies in front that append the client's address to X-Forwarded-For: the client is the address that
    # many hops back (the limits' and the access log's). 0 = the socket's peer; no header is believed.
    TRUSTED_PROXIES: int = 0
    # Heavy work (inline fits, every-mode answers, large fleet plans, fits of a stored workload of more than
    # HEAVY_FIT_ROWS rows on upload or lookup; api.heavy): this many run at once per process and this many
    # more wait up to HEAVY_WAIT_S (s); beyond that, 503 with Retry-After. Keep HEAVY_SLOTS + HEAVY_QUEUE
    # below THREADS so that light requests always find a thread.
    HEAVY_SLOTS: int = 1
    HEAVY_QUEUE: int = 2
    HEAVY_WAIT_S: int = 10
    HEAVY_FIT_ROWS: int = DEFAULT_HEAVY_FIT_ROWS
    ANSWER_CACHE_MB: int = 64  # encoded every-mode answers kept per process (MB); 0 = none
    ANSWER_CACHE_DISK_MB: int = 256  # and under DATA_DIR/answers, shared by the host's workers (MB); 0 = none
    # Inline profile rows a prediction may carry without X-API-Key (with a key: schemas.MAX_REQUEST_ROWS).
    INLINE_ROWS_WITHOUT_KEY: int = DEFAULT_INLINE_ROWS_WITHOUT_KEY
    ACCESS_LOG: str = "on"  # one line per request on logger jetpredict.access (stderr); "off" = none

    @property
    def rate_limits_on(self) -> bool:
        return self.RATE_LIMIT.lower() not in RATE_LIMIT_OFF or self.RATE_LIMIT_ALL_MODES.lower() not in RATE_LIMIT_OFF

    @property
    def database_url(self) -> str:
        """The SQLAlchemy URL: ``DATABASE_URL`` or the SQLite file under ``DATA_DIR``."""
        if self.DATABASE_URL:
            return self.DATABASE_URL
        return f"sqlite:///{(Path(self.DATA_DIR) / SQLITE_FILE_NAME).resolve()}"


#: The highest TCP port.
_MAX_PORT = 65535
_INT_SETTINGS = {"MAX_BODY_BYTES": 1, "PORT": 0, "WORKERS": 1, "THREADS": 1, "MODEL_CACHE_SIZE": 1,
                 "REQUEST_READ_TIMEOUT_S": 1, "HEAVY_SLOTS": 1, "HEAVY_QUEUE": 0, "HEAVY_WAIT_S": 0,
                 "ANSWER_CACHE_MB": 0, "ANSWER_CACHE_DISK_MB": 0, "INLINE_ROWS_WITHOUT_KEY": 1, "HEAVY_FIT_ROWS": 1,
                 "TRUSTED_PROXIES": 0}


def _coerce(name: str, value: object) -> object:
    if name in _INT_SETTINGS:
        try:
            number = int(str(value).strip())
        except ValueError:
            raise InputError(f"{ENV_PREFIX}{name} must be a whole number, got {value!r}", name) from None
        low, high = _INT_SETTINGS[name], _MAX_PORT if name == "PORT" else None
        if number < low or (high is not None and number > high):
            rule = f"between {low} and {high}" if high is not None else f"at least {low}"
            raise InputError(f"{ENV_PREFIX}{name}={number} is out of range: must be {rule}", name)
        return number
    if name == "API_KEYS":
        return _api_keys(value)  # type: ignore[arg-type]
    if name == "CORS_ORIGINS":
        return _split(value)  # type: ignore[arg-type]
    if name in ("RATE_LIMIT", "RATE_LIMIT_ALL_MODES"):
        text = str(value).strip()
        if text.lower() not in RATE_LIMIT_OFF:
            from limits import parse_many

            try:
                items = parse_many(text)
            except ValueError:
                raise InputError(f"{ENV_PREFIX}{name}={text!r} is not a rate limit such as '60/minute' or "
                                 "'10/second;100/minute' (or 'off')", name) from None
            # Flask-Limiter takes "0/second" and then refuses every request with 429.
            if any(item.amount < 1 for item in items):
                raise InputError(f"{ENV_PREFIX}{name}={text!r} allows 0 requests, which would refuse every "
                                 "request: give at least 1 per window, or use 'off' to disable", name)
        return text
    if name == "RATE_LIMIT_STORAGE_URL":
        return _rate_limit_store(str(value).strip())
    if name == "ACCESS_LOG":
        text = str(value).strip().lower()
        if text not in ("on", "off"):
            raise InputError(f"{ENV_PREFIX}{name} must be on or off, got {value!r}", name)
        return text
    if name == "DATA_DIR":
        return Path(str(value)).expanduser()
    return str(value).strip()


#: The extra that installs each client library a rate-limit store needs (the rest: pip install NAME).
_STORE_EXTRAS = {"redis": "jetpredict[redis]"}


def _rate_limit_store(url: str) -> str:
    """``url`` when it names a rate-limit store the ``limits`` package knows and whose client library is
    installed; else an InputError naming the setting (Flask-Limiter failed with a traceback at start). The
    URL is shown only where it holds no credentials."""
    from limits.storage import SCHEMES

    scheme = url.partition("://")[0] if "://" in url else ""
    # A password may sit before "@" or in the query (redis://h?password=...): show only the scheme then.
    shown = url if "@" not in url and "?" not in url else f"{scheme}://***"
    name = f"{ENV_PREFIX}RATE_LIMIT_STORAGE_URL={shown!r}"
    if scheme not in SCHEMES or scheme.startswith("async+"):  # Flask-Limiter counts synchronously
        raise InputError(f"{name} is not a rate-limit store: give memory:// (per worker), redis://HOST:PORT, "
                         "rediss://, redis+sentinel://, memcached:// or mongodb:// (the limits package's URLs)",
                         "RATE_LIMIT_STORAGE_URL")
    import importlib.util

    modules = {module.split(".")[0] for module in getattr(SCHEMES[scheme], "DEPENDENCIES", None) or ()}
    # One store class serves redis:// and valkey://, listing both clients: each scheme needs its own alone.
    family = next((m for m in ("redis", "valkey") if scheme.startswith(m)), None)
    for module in sorted({family} if family in modules else modules):
        if importlib.util.find_spec(module) is None:
            install = _STORE_EXTRAS.get(module, module)
            raise InputError(f"{name} needs the Python package {module}, which is not installed: "
                             f"pip install '{install}'", "RATE_LIMIT_STORAGE_URL")
    return url


def load_settings(overrides: Mapping[str, object] | None = None,
                  environ: Mapping[str, str] | None = None) -> Settings:
    """Settings from defaults < ``JETPREDICT_*`` variables < ``overrides`` (keys as the field names)."""
    environ = os.environ if environ is None else environ
    names = {f.name for f in fields(Settings)}
    values: dict[str, object] = {}
    for name in names:
        raw = environ.get(ENV_PREFIX + name)
        if raw is not None and raw != "":
            values[name] = _coerce(name, raw)
    for name, value in (overrides or {}).items():
        if name in names and value is not None:
            values[name] = _coerce(name, value)
    return Settings(**values)  # type: ignore[arg-type]
