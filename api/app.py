"""The Flask application factory: ``create_app(config)`` builds one service instance.

``config`` keys are the :class:`api.config.Settings` names (``DATA_DIR``, ``DATABASE_URL``,
``API_KEYS``, ...) or Flask settings (``TESTING``); anything not given comes from ``JETPREDICT_*``.
"""

from __future__ import annotations

import io
import logging
import re
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import quote

from flask import Flask, Response, request
from flask_smorest import Api
from jetpredict.api.config import (
    DEFAULT_HEAVY_FIT_ROWS,
    DEFAULT_INLINE_ROWS_WITHOUT_KEY,
    HEAVY_CLIENTS,
    HEAVY_MODES,
    RATE_LIMIT_OFF,
    Settings,
    load_settings,
)
from jetpredict.api.errors import ApiError, quiet_pool_tracebacks, register_error_handlers
from jetpredict.api.heavy import AnswerCache, HeavyGate
from jetpredict.api.metrics import Metrics, request_elapsed_s
from jetpredict.api.openapi_doc import add_device_ranges
from jetpredict.api.routes import (
    devices,
    fleet_plans,
    health,
    page,
    predictions,
    profiles,
    recommendations,
    reference_workloads,
    workloads,
)
from jetpredict.api.routes.common import API_KEY_HEADER, Services
from jetpredict.api.schemas import IDEMPOTENCY_HEADER, ErrorSchema
from jetpredict.api.storage import Storage
from jetpredict.api.workloads import WorkloadService

log = logging.getLogger("jetpredict.api")

BLUEPRINTS = (health.blp, devices.blp, predictions.blp, recommendations.blp, fleet_plans.blp,
              profiles.blp, workloads.blp, reference_workloads.blp)
_BODY_METHODS = ("POST", "PUT", "PATCH")
#: Endpoints (blueprint.view) under the per-client rate limits.
COSTLY_ENDPOINTS = ("predictions.Predictions", "recommendations.Recommendations", "fleet_plans.FleetPlans",
                    "profiles.Profiles")
#: Longest path + query string in bytes (as nginx's default); gunicorn itself is told not to cut earlier,
#: so that the answer is our JSON error rather than the server's HTML page.
MAX_URL_BYTES = 8192


API_DESCRIPTION = (
    "Predict DNN training epoch time and energy on every Jetson power mode.\n\n"
    "Access: reads are public. Every GET and the prediction routes (predictions, recommendations, fleet "
    "plans) answer anyone who can reach the service, including the stored workloads and their profile "
    "rows; only writes (POST /v1/profiles, DELETE /v1/workloads/{id}) need the X-API-Key header. Bind to "
    "loopback (the default) or put the service behind a proxy that authenticates when rows are "
    "confidential. Costly routes are rate limited per client address (429 with Retry-After); a database "
    "that cannot be reached, or a store that cannot write, answers 503 with Retry-After. Heavy requests "
    f"(inline fits, answers for every mode, lists of more than {HEAVY_MODES:,} modes, fleet plans of more "
    f"than {HEAVY_CLIENTS} clients, recommendations and fleet plans that need a device's "
    "every-mode prediction at a confidence not computed before, fits "
    f"of a stored workload of more than {DEFAULT_HEAVY_FIT_ROWS:,} rows on upload or lookup, by default) run "
    "a few at a time per worker and answer 503 with Retry-After when that is full; inline rows beyond "
    f"{DEFAULT_INLINE_ROWS_WITHOUT_KEY:,} need X-API-Key (by default). "
    "Every-mode answers come as JSON rows, JSON columns (layout: columns), CSV or Apache Arrow (Accept), "
    "gzip-compressed when Accept-Encoding allows it. Request bodies are JSON (Content-Type application/json) "
    "sent uncompressed: a Content-Encoding other than identity is answered 415.")


class JetApi(Api):
    """flask-smorest's Api, documenting errors with our error schema."""

    ERROR_SCHEMA = ErrorSchema


def _openapi_config(settings: Settings) -> dict[str, object]:
    return {
        "API_TITLE": "jetpredict",
        "API_VERSION": "v1",
        "OPENAPI_VERSION": "3.0.3",
        "OPENAPI_URL_PREFIX": "/",
        "OPENAPI_JSON_PATH": "openapi.json",
        # No OPENAPI_SWAGGER_UI_PATH: flask-smorest's Swagger page has an inline script and loads a CDN;
        # /docs is served from the package by api.routes.page (vendored Swagger UI, works offline).
        "API_SPEC_OPTIONS": {
            "info": {"description": API_DESCRIPTION},
            "servers": [{"url": "/"}],
        },
        "MAX_CONTENT_LENGTH": settings.MAX_BODY_BYTES,
    }


#: Headers on every answer. The API serves JSON and the page serves its JS/CSS as files (no inline code),
#: so everything may come from this origin only, and nothing may frame it.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Resource-Policy": "same-origin",
}
_WRITE_METHODS = ("POST", "PUT", "PATCH", "DELETE")
#: A CORS preflight may be cached by the browser this long (s).
CORS_MAX_AGE_S = 600


def _route_methods(app: Flask) -> set[str]:
    """Methods the matched route serves (for preflight answers), empty when no route matches."""
    adapter = app.url_map.bind_to_environ(request.environ)
    try:
        return set(adapter.allowed_methods(request.path)) - {"HEAD"}
    except Exception:  # noqa: BLE001 - a path that matches nothing has no methods
        return set()


def _cors_allowed(settings: Settings, origin: str | None) -> bool:
    return bool(origin and settings.CORS_ORIGINS and ("*" in settings.CORS_ORIGINS
                                                       or origin in settings.CORS_ORIGINS))


#: SECURITY_HEADERS as (lower-case name, (name, value)): the after-request hook compares names without
#: lowering the constant ones again on every answer.
_SECURITY_HEADER_ITEMS = tuple((name.lower(), (name, value)) for name, value in SECURITY_HEADERS.items())


def _read_unsized_body(environ: dict, limit: int) -> int:
    """Read a body sent without Content-Length (chunked) up to one byte past ``limit`` and put it back as
    the request's input; returns its length in bytes (``limit + 1``: larger than the limit). Werkzeug cuts
    such a body at ``MAX_CONTENT_LENGTH`` without a word, so the cut JSON would be answered 400 "invalid
    JSON", not the 413 that a body with a Content-Length gets."""
    body = environ["wsgi.input"].read(limit + 1)
    environ["wsgi.input"] = io.BytesIO(body)
    return len(body)


def _queryless_endpoints(app: Flask) -> frozenset[tuple[str, str]]:
    """(endpoint, method) of every ``/v1/`` route (the OpenAPI blueprints') whose parameters hold no query schema;
    /healthz and /metrics take what a prober or scraper adds."""
    api_blueprints = {blp.name for blp in BLUEPRINTS}
    none: set[tuple[str, str]] = set()
    for rule in app.url_map.iter_rules():
        if rule.endpoint.split(".", 1)[0] not in api_blueprints or not rule.rule.startswith("/v1/"):
            continue
        view_class = getattr(app.view_functions[rule.endpoint], "view_class", None)
        for method in (rule.methods or set()) - {"OPTIONS"}:  # a preflight carries no query of the route's
            handler = "get" if method == "HEAD" else method.lower()  # HEAD answers as GET
            doc = getattr(getattr(view_class, handler, None), "_apidoc", {})
            if not any(p.get("in") == "query" for p in doc.get("arguments", {}).get("parameters", [])):
                none.add((rule.endpoint, method))
    return frozenset(none)


def _install_request_guards(app: Flask, settings: Settings) -> None:
    # A route without a query schema read none of its query: `DELETE /v1/workloads/x?dry_run=1` deleted.
    queryless = _queryless_endpoints(app)

    # The hooks read the request through one context lookup (request._get_current_object()) rather than
    # one per attribute (~0.6 us each), and the app's services without current_app: they run on every request.
    @app.before_request
    def _guards():
        req = request._get_current_object()
        if req.method == "OPTIONS" and settings.CORS_ORIGINS and req.url_rule is not None:
            return Response(status=204)  # a preflight only for a path that is a route (else 404/405)
        url_bytes = len(req.path.encode()) + len(req.query_string)
        if url_bytes > MAX_URL_BYTES:
            raise ApiError(414, f"the URL is {url_bytes} bytes; the limit is {MAX_URL_BYTES}",
                           {"url": [f"must be at most {MAX_URL_BYTES} bytes"]})
        length, sized = req.content_length, True
        if length is None and req.environ.get("wsgi.input_terminated"):
            length, sized = _read_unsized_body(req.environ, settings.MAX_BODY_BYTES), False
        if length is not None and length > settings.MAX_BODY_BYTES:
            # A chunked body is read one byte past the limit only: its size is not known, only "more".
            size = f"{length} bytes" if sized else f"more than {settings.MAX_BODY_BYTES} bytes"
            raise ApiError(413, f"request body is {size}; the limit is {settings.MAX_BODY_BYTES}",
                           {"body": [f"must be at most {settings.MAX_BODY_BYTES} bytes"]})
        if req.method in _BODY_METHODS and req.url_rule is not None:
            # A compressed body is not inflated (a small gzip body can inflate past the size limit), so say
            # so rather than answer 400 "invalid JSON" for bytes that are JSON once inflated.
            encoding = req.headers.get("Content-Encoding", "").strip()
            if encoding and encoding.lower() != "identity":
                raise ApiError(415, f"Content-Encoding {encoding} is not accepted: request bodies must be sent "
                               "uncompressed", {"Content-Encoding": ["must be absent or identity: send the body "
                                                                    "uncompressed"]})
            mimetype = req.mimetype
            if not (mimetype == "application/json" or mimetype.endswith("+json")):
                raise ApiError(415, f"Content-Type must be application/json, got {mimetype or 'none'}",
                               {"Content-Type": ["must be application/json"]})
        if req.args and (req.endpoint, req.method) in queryless:
            name = f"query.{next(iter(req.args))}"
            raise ApiError(422, f"{name}: unknown parameter; this route takes none", {name: [
                "unknown parameter; this route takes none"]})
        # Until the database is back the routes that need it answer 503 themselves; the catalogue works.
        app.extensions["jetpredict"].ensure_schema(raise_errors=False)
        return None

    @app.after_request
    def _headers(response: Response) -> Response:
        req = request._get_current_object()
        headers = response.headers
        present = {name.lower() for name, _ in headers.items()}
        missing = [item for lower, item in _SECURITY_HEADER_ITEMS if lower not in present]
        if missing:  # one pass over the few headers a response has, not a lookup per security header
            headers.extend(missing)
        if req.method in _WRITE_METHODS or response.status_code >= 400:
            headers["Cache-Control"] = "no-store"
        if response.status_code not in (429, 503) and "Retry-After" in headers:
            # Flask-Limiter puts it on every answer of a limited route; it means "wait" only on a refusal.
            del headers["Retry-After"]
        elif response.status_code == 429 and headers.get("Retry-After", "").isdigit():
            # Flask-Limiter floors the seconds left (0 for most of a 1-second window, so a client that obeys
            # retries at once and is refused again): one more is never too early.
            headers["Retry-After"] = str(int(headers["Retry-After"]) + 1)
        if settings.CORS_ORIGINS:
            response.vary.add("Origin")  # the answer depends on Origin: caches must keep them apart
            origin = req.headers.get("Origin")
            if _cors_allowed(settings, origin) and req.url_rule is not None:
                response.headers["Access-Control-Allow-Origin"] = "*" if "*" in settings.CORS_ORIGINS else origin
                response.headers["Access-Control-Allow-Headers"] = (
                    f"Content-Type, {API_KEY_HEADER}, {IDEMPOTENCY_HEADER}")
                methods = sorted(_route_methods(app) | {"OPTIONS"})
                response.headers["Access-Control-Allow-Methods"] = ", ".join(methods)
                response.headers["Access-Control-Max-Age"] = str(CORS_MAX_AGE_S)
        return response


#: One line per request: client, method, path, status, body bytes, server time (ms).
access_log = logging.getLogger("jetpredict.access")
#: Longest path written to the access log (characters); longer ones are cut.
ACCESS_LOG_PATH_CHARS = 300
#: Characters an access-log path keeps as they are; anything else is percent-encoded.
_PATH_SAFE = "/:@-._~!$&'()*+,;="
_PLAIN_PATH = re.compile(r"[A-Za-z0-9/:@\-._~!$&'()*+,;=]*")


class AccessLogFormatter(logging.Formatter):
    """``%(asctime)s %(message)s``, the date and time text made once per second rather than per line."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(message)s")
        self._second: tuple[int, str] = (-1, "")

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802 - logging's
        second = int(record.created)
        cached = self._second  # one tuple: threads see a whole (second, text) pair
        if cached[0] != second:
            cached = self._second = (second, time.strftime(self.default_time_format, self.converter(record.created)))
        return self.default_msec_format % (cached[1], record.msecs)


def _install_access_log(app: Flask, settings: Settings) -> None:
    """``ACCESS_LOG=on``: a line per request on ``jetpredict.access`` (to standard error unless the
    application configured that logger). The path is percent-encoded, so no client text can forge lines."""
    if settings.ACCESS_LOG == "off":
        return
    if not access_log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(AccessLogFormatter())
        access_log.addHandler(handler)
        access_log.setLevel(logging.INFO)
        access_log.propagate = False

    @app.after_request
    def _access_line(response: Response) -> Response:
        if not access_log.isEnabledFor(logging.INFO):  # level raised by the application: no line to build
            return response
        req = request._get_current_object()
        elapsed_ms = request_elapsed_s() * 1000
        path = req.path
        if not _PLAIN_PATH.fullmatch(path):  # most paths need no quoting; quote() costs ~10 us
            path = quote(path, safe=_PATH_SAFE)
        path = path[:ACCESS_LOG_PATH_CHARS]
        length = response.content_length
        access_log.info('%s "%s %s" %d %s %.1fms', req.remote_addr or "-", req.method, path,
                        response.status_code, length if length is not None else "-", elapsed_ms)
        return response


def _asks_for_all_modes() -> bool:
    """Whether the request asks for ``"modes": "all"`` or lists more than HEAVY_MODES modes: a long list
    costs as "all" does, so it counts against the same limit."""
    body = request.get_json(silent=True) if request.is_json else None
    if not isinstance(body, dict):
        return False
    modes = body.get("modes")
    return modes == "all" or (isinstance(modes, list) and len(modes) > HEAVY_MODES)


def _install_rate_limits(app: Flask, settings: Settings) -> None:
    """Per-client (remote address; behind ``TRUSTED_PROXIES`` proxies, the forwarded one) limits on the
    routes that cost CPU: predictions, recommendations, fleet plans, uploads; a tighter one on ``modes:
    "all"`` (~30k rows, MBs per answer) and on lists of more than HEAVY_MODES modes. ``off`` = none.

    The counters live in ``RATE_LIMIT_STORAGE_URL`` (``memory://``: per worker process; a shared store
    such as ``redis://`` makes the limits hold across workers and instances).
    """
    if not settings.rate_limits_on:
        return
    from flask_limiter import Limiter
    from flask_limiter.util import get_remote_address

    # swallow_errors: a counter store that is down lets requests through (logged) rather than failing them.
    limiter = Limiter(get_remote_address, app=app, storage_uri=settings.RATE_LIMIT_STORAGE_URL,
                      headers_enabled=True, default_limits=[], swallow_errors=True)
    app.extensions["jetpredict_limiter"] = limiter
    decorators = []
    if settings.RATE_LIMIT.lower() not in RATE_LIMIT_OFF:
        decorators.append(limiter.shared_limit(settings.RATE_LIMIT, scope="costly", methods=["POST"]))
    if settings.RATE_LIMIT_ALL_MODES.lower() not in RATE_LIMIT_OFF:
        decorators.append(limiter.shared_limit(settings.RATE_LIMIT_ALL_MODES, scope="all-modes",
                                               methods=["POST"], exempt_when=lambda: not _asks_for_all_modes()))
    for endpoint in COSTLY_ENDPOINTS:
        view = app.view_functions.get(endpoint)
        for decorate in decorators if view is not None else ():
            view = decorate(view)
        if view is not None:
            app.view_functions[endpoint] = view


def _trust_proxies(app: Flask, settings: Settings) -> None:
    """``TRUSTED_PROXIES=N``: the client address is the one N hops back in X-Forwarded-For, for the rate
    limits and the access log. Only the address: the service writes no absolute URL, so neither the scheme
    nor the host a proxy forwards is needed (and an untrusted one could be forged)."""
    if settings.TRUSTED_PROXIES:
        from werkzeug.middleware.proxy_fix import ProxyFix

        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=settings.TRUSTED_PROXIES, x_proto=0)


def _warm_up() -> None:
    """Import the predictor now (seconds, once per process) rather than in the first request."""
    try:
        import jetpredict.predictor.model  # noqa: F401
        import jetpredict.predictor.service  # noqa: F401
    except ImportError:  # pragma: no cover - a broken install shows up on the first prediction instead
        log.exception("predictor not importable")


#: How long (s) a thread may hold the GIL while another waits for it (Python's default is 5 ms). A light
#: request hands the GIL back and forth with a running heavy one a few times (socket reads and writes);
#: 1 ms keeps each handoff short at a small cost in throughput of the heavy work.
GIL_SWITCH_INTERVAL_S = 0.001


def create_app(config: Mapping[str, object] | None = None) -> Flask:
    """A ready service: settings resolved, database schema created, blueprints registered."""
    config = dict(config or {})
    if sys.getswitchinterval() > GIL_SWITCH_INTERVAL_S:
        sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    settings = load_settings(config)
    app = Flask("jetpredict")
    # Werkzeug answers a doubled slash with a redirect to an absolute URL built from the client's Host
    # header (/assets//page.js -> http://evil.example/assets/page.js): such a path is a JSON 404 instead.
    # Set before any rule is added: each rule takes the map's setting when it is bound.
    app.url_map.merge_slashes = False
    app.json.sort_keys = False  # keep the documented field order
    app.config.update(_openapi_config(settings))
    app.config.update({k: v for k, v in config.items() if k not in Settings.__dataclass_fields__})

    storage = Storage(settings.database_url)
    metrics = Metrics()
    gate = HeavyGate(settings.HEAVY_SLOTS, settings.HEAVY_QUEUE, settings.HEAVY_WAIT_S,
                     on_reject=lambda what: metrics.heavy_rejected.inc())
    workload_service = WorkloadService(storage, settings.MODEL_CACHE_SIZE, gate, settings.HEAVY_FIT_ROWS)
    services = Services(settings, storage, workload_service, metrics, gate,
                        AnswerCache(settings.ANSWER_CACHE_MB * 1024 * 1024, Path(settings.DATA_DIR) / "answers",
                                    settings.ANSWER_CACHE_DISK_MB * 1024 * 1024))
    # A database that is down at boot does not stop the service: requests answer 503 until it is back,
    # and the first one after that creates the schema.
    services.ensure_schema(raise_errors=False)
    storage.dispose()  # no pooled connection may cross a fork (gunicorn preloads the app, then forks)
    _warm_up()
    quiet_pool_tracebacks()
    services.metrics.init_app(app)
    app.extensions["jetpredict"] = services

    api = JetApi(app)
    api.spec.components.security_scheme("ApiKeyAuth", {"type": "apiKey", "in": "header", "name": API_KEY_HEADER})
    for blp in BLUEPRINTS:
        api.register_blueprint(blp)
    # "Exactly one of id or rows", in the document too (marshmallow says it in a schema validator).
    api.spec.components.schemas["WorkloadRef"].update(minProperties=1, maxProperties=1)
    # Knobs within each device's own range, as the server checks them (oneOf + discriminator on device).
    add_device_ranges(api.spec.components.schemas)
    api.spec._paths["/v1/profiles"]["post"]["responses"]["201"]["links"] = profiles.UPLOAD_LINKS
    app.register_blueprint(page.blp)  # "/", "/docs", "/assets/...": not API routes, not in the OpenAPI document
    _install_request_guards(app, settings)
    _install_access_log(app, settings)
    _install_rate_limits(app, settings)
    _trust_proxies(app, settings)
    register_error_handlers(app)  # after Api(app), so these handlers replace flask-smorest's
    return app
