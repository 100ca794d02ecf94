"""What the blueprints share: the app's services, API-key checks, JSON-ready values."""

from __future__ import annotations

import functools
import hmac
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn, TypeVar

import flask_smorest
from flask import current_app, request
from jetpredict.api.config import Settings
from jetpredict.api.database_url import driver_reason, masked_url
from jetpredict.api.errors import ApiError, release, store_fault
from jetpredict.api.heavy import AnswerCache, HeavyGate
from jetpredict.api.metrics import Metrics
from jetpredict.api.schemas import ErrorSchema
from jetpredict.api.storage import Storage
from jetpredict.api.store_failures import is_unreachable
from jetpredict.api.workloads import Resolved, WorkloadService
from jetpredict.models.jsonsafe import json_safe
from marshmallow import Schema, ValidationError
from webargs.flaskparser import FlaskParser

log = logging.getLogger("jetpredict.api")

T = TypeVar("T")

API_KEY_HEADER = "X-API-Key"
SECURITY = [{"ApiKeyAuth": []}]


@dataclass
class Services:
    """Everything a request handler needs, built once per app."""

    settings: Settings
    storage: Storage
    workloads: WorkloadService
    metrics: Metrics
    heavy: HeavyGate
    answers: AnswerCache
    schema_ready: bool = False
    #: The boot-time outage was logged: requests that find it still down (each tries again) do not repeat it.
    outage_said: bool = False
    _schema_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def ensure_schema(self, raise_errors: bool = True) -> None:
        """Create the schema once per process; while the database is unreachable, raise (503) or, at
        boot (``raise_errors=False``), log and let the next request try again."""
        if self.schema_ready:
            return
        with self._schema_lock:
            if self.schema_ready:
                return
            try:
                self.storage.create_schema()
            except Exception as exc:
                if raise_errors or not is_unreachable(exc):
                    raise
                fault = store_fault(exc, self.storage.location, self.storage.url)
                if fault is not None:  # no wait fixes it: say so (serve exits 2 on it; a bare WSGI app runs)
                    log.error("%s; answering 503 meanwhile", fault[0])
                elif not self.outage_said:
                    self.outage_said = True
                    log.warning("database %s unreachable at start (%s: %s); answering 503 until it is back",
                                masked_url(self.storage.url), type(exc).__name__, driver_reason(exc, self.storage.url))
                return
            self.schema_ready = True


def services() -> Services:
    return current_app.extensions["jetpredict"]


def has_api_key() -> bool:
    """Whether the request carries a valid ``X-API-Key`` (401/403 when it carries a wrong one)."""
    if not request.headers.get(API_KEY_HEADER):
        return False
    check_api_key()
    return True


def request_workload(workload: Mapping[str, Any], field: str = "workload", device: str | None = None
                     ) -> Resolved:
    """A request's workload: stored (``{"id"}``) or inline rows, fitted as heavy work (:mod:`api.heavy`).

    Without a key a request may carry ``INLINE_ROWS_WITHOUT_KEY`` rows inline (413 beyond; with a key, up
    to the schema's limit): a fit is the costliest thing an anonymous client can ask for.
    """
    svc = services()
    rows = workload.get("rows")
    if rows is None:
        return svc.workloads.resolve(workload, field, device)  # device: whose rows serve (api.workloads)
    limit = svc.settings.INLINE_ROWS_WITHOUT_KEY
    if len(rows) > limit and not has_api_key():
        rule = (f"at most {limit} rows without header {API_KEY_HEADER} (got {len(rows)}); send a key or "
                "upload the rows with POST /v1/profiles and predict by id")
        raise ApiError(413, f"{field}.rows: {rule}", {f"{field}.rows": [rule]})
    return svc.heavy.run("a fit of inline rows", lambda: svc.workloads.resolve(workload, field))


def heavy_unless(light: bool, what: str, work: Callable[[], T]) -> T:
    """``work()`` on the request thread when ``light`` (the caller found it cheap: what it reads already
    computed, :func:`predictor.space.space_ready`, and its size under the limits), else as heavy work (503
    with Retry-After when the gate is full). ``work`` must not need the Flask request context."""
    return work() if light else services().heavy.run(what, work)


def check_api_key() -> None:
    """401 without ``X-API-Key``, 403 when it matches none of the configured keys (constant time)."""
    supplied = request.headers.get(API_KEY_HEADER, "")
    if not supplied:
        raise ApiError(401, f"header {API_KEY_HEADER} is required for this request",
                       {API_KEY_HEADER: ["is required"]},
                       headers={"WWW-Authenticate": f'ApiKey header="{API_KEY_HEADER}"'})
    supplied_bytes = supplied.encode("utf-8", "surrogateescape")
    match = False
    for key in services().settings.API_KEYS:
        # Compare against every key, so the time taken does not tell which (or whether one) matched.
        match |= hmac.compare_digest(supplied_bytes, key.encode("utf-8"))
    if not match:
        reason = ("is not one of the service's keys" if services().settings.API_KEYS
                  else "cannot match: the service has no keys configured (JETPREDICT_API_KEYS)")
        raise ApiError(403, f"header {API_KEY_HEADER} {reason}", {API_KEY_HEADER: [reason]})


def require_api_key(view):
    """Decorator for write views; runs before the body is parsed."""

    @functools.wraps(view)
    def wrapper(*args, **kwargs):
        check_api_key()
        return view(*args, **kwargs)

    return wrapper


def doc_only(*decorators: Callable[[Callable], Callable]) -> Callable[[Callable], Callable]:
    """flask-smorest ``response``/``alt_response`` decorators applied for the OpenAPI document only, to a
    view that returns a ready :class:`flask.Response` (or raises). Each adds a layer that calls the view
    through ``current_app.ensure_sync`` and hands such a Response back unchanged, ~2 us per layer and
    request; the view keeps their documentation (``_apidoc``) and runs without the layers."""

    def decorate(view: Callable) -> Callable:
        documented = view
        for decorator in reversed(decorators):
            documented = decorator(documented)
        view._apidoc = documented._apidoc  # type: ignore[attr-defined]
        return view

    return decorate


#: The error answers of every route that takes a workload (a stored id or inline rows) and may be heavy
#: work: {status: description}.
WORKLOAD_ERRORS = {404: "workload id not stored", 413: "more inline rows than allowed without a key",
                   503: "busy with heavy requests; see Retry-After"}


def workload_error_docs(blp: flask_smorest.Blueprint, more: Mapping[int, str] | None = None
                        ) -> tuple[Callable[[Callable], Callable], ...]:
    """``blp.alt_response`` decorators for :func:`doc_only` documenting :data:`WORKLOAD_ERRORS` and the
    route's ``more`` ({status: description}), in status order, each with an :class:`ErrorSchema` body."""
    errors = {**WORKLOAD_ERRORS, **(more or {})}
    return tuple(blp.alt_response(status, schema=ErrorSchema, description=errors[status])
                 for status in sorted(errors))


#: Request bodies up to this size (bytes) have their loaded arguments remembered by RepeatedBodyParser.
REPEATED_BODY_BYTES = 1024


def _fresh(value: object) -> object:
    """A copy of loaded arguments whose dicts and lists are new (the scalars inside are immutable)."""
    if isinstance(value, dict):
        return {k: _fresh(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_fresh(v) for v in value]
    return value


class Parser(FlaskParser):
    """webargs' Flask parser with the query string held to its schema's ``unknown`` (RAISE for every
    :class:`~jetpredict.api.schemas.RequestSchema`): webargs' default there is EXCLUDE, which answered a
    typo (``?limt=5``) with the defaults, and a route had to remember to ask for RAISE."""

    DEFAULT_UNKNOWN_BY_LOCATION = {**FlaskParser.DEFAULT_UNKNOWN_BY_LOCATION, "query": None, "querystring": None}

    def _on_validation_error(self, error: ValidationError, *args: Any, **kwargs: Any) -> NoReturn:
        release(error)  # only the messages are answered
        super()._on_validation_error(error, *args, **kwargs)


class Blueprint(flask_smorest.Blueprint):
    """flask-smorest's Blueprint with the project's :class:`Parser`."""

    ARGUMENTS_PARSER = Parser()


class RepeatedBodyParser(Parser):
    """webargs' Flask parser that remembers what small JSON bodies load to.

    Clients send the same few bodies again and again (a workload's presets), and parsing and validating one
    costs ~30 us, an eighth of such a request. Loading is a function of the body's bytes, its media type and
    the schema, so a body already loaded is answered from memory (a fresh copy: views may change it); bad
    bodies raise and are never remembered. ``size`` bodies are kept, the oldest dropped first.
    """

    def __init__(self, size: int = 256) -> None:
        super().__init__()
        self.size = size
        self._loaded: OrderedDict[tuple, object] = OrderedDict()
        self._lock = threading.Lock()

    def parse(self, argmap: Any, req: Any = None, **kwargs: Any) -> Any:
        req = req if req is not None else request
        length = req.content_length
        if (kwargs.get("location") != "json" or not isinstance(argmap, Schema) or length is None
                or length > REPEATED_BODY_BYTES):
            return super().parse(argmap, req, **kwargs)
        # What loading depends on (error status and headers only shape an error, which is not kept).
        key = (id(argmap), kwargs.get("unknown"), id(kwargs.get("validate")), req.mimetype,
               req.get_data(cache=True))
        with self._lock:
            loaded = self._loaded.get(key)
        if loaded is None:
            loaded = super().parse(argmap, req, **kwargs)
            with self._lock:
                self._loaded[key] = loaded
                while len(self._loaded) > self.size:
                    self._loaded.popitem(last=False)
        return _fresh(loaded)


#: A JSON-ready copy: numpy scalars to Python, NaN/inf to None, recursively (one helper, in models).
clean = json_safe
