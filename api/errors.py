"""One JSON error shape for every failure: ``{"code", "status", "message", "errors": {field: [..]}}``.

``code`` is the HTTP status (as flask-smorest does), ``errors`` maps a dotted field path (``workload.id``,
``rows.3.gpu_mhz``) to messages. Bad input never becomes a 500: :class:`models.errors.InputError` is a
422 (404 for an unknown workload), malformed or too deeply nested bodies are 400, numeric overflow is a
422, a database that cannot be reached, refuses the URL itself, is damaged or of a newer format is a 503 (with
``Retry-After``),
and unexpected exceptions are logged and answered with a 500 that carries no stack trace.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping

from flask import Flask, jsonify
from jetpredict.api import sqlite_setup
from jetpredict.api.database_url import driver_reason, refused_as_given
from jetpredict.api.store_failures import StoreRefused, is_unreachable, store_damage, write_failure
from jetpredict.models.errors import InputError, UnknownWorkloadError
from werkzeug.exceptions import HTTPException

log = logging.getLogger("jetpredict.api")

#: s a client should wait before retrying when the database is unreachable (header Retry-After of a 503)
DB_RETRY_AFTER_S = 2
#: s before retrying a write when the store is full or read-only: an operator has to act first.
STORE_RETRY_AFTER_S = 60


def store_fault(exc: BaseException, location: str, url: str) -> tuple[str, str] | None:
    """(message, reason) when ``exc`` says the database at ``location`` (``url``, for the driver's reason with
    its secrets hidden) refused the URL itself (user, password, database name), is damaged or of a newer
    format: an operator has to act (fix the URL, restore the file, upgrade jetpredict), a retry alone will
    not help."""
    if isinstance(exc, StoreRefused):
        return str(exc), "newer format"
    if is_unreachable(exc) and refused_as_given(exc):
        reason = driver_reason(exc, url)
        return (f"the database {location} refused the connection: {reason}; check the user, password, database "
                "name and options of --database-url (JETPREDICT_DATABASE_URL), and that the role may log in "
                "and connect to that database", f"refused: {reason}")
    damage = store_damage(exc)
    return None if damage is None else (damaged_message(location, damage), f"damaged: {damage}")


def damaged_message(location: str, damage: str) -> str:
    """What an operator is told of a damaged database at ``location`` (``damage``: what SQLite found)."""
    return (f"the database {location} is damaged ({damage}): an operator must restore it from a backup "
            "(or move it aside to start an empty one)")


def _one_line_pool_record(record: logging.LogRecord) -> bool:
    """SQLAlchemy's pool logs a connection that fails its reset (a database gone mid-request) at ERROR with
    chained tracebacks, on every outage: made one WARNING line naming the driver's error; the requests'
    own 503 lines say the outage."""
    if record.exc_info and record.exc_info[1] is not None:
        exc = record.exc_info[1]
        record.msg = f"{record.getMessage()}: {type(exc).__name__}: {' '.join(str(exc).split())}"
        record.args, record.exc_info, record.exc_text = None, None, None
        record.levelno, record.levelname = logging.WARNING, logging.getLevelName(logging.WARNING)
    return True


def quiet_pool_tracebacks() -> None:
    """Install :func:`_one_line_pool_record` on the loggers of SQLAlchemy's pool classes (a logger's filter
    sees only its own records, so each pool class's; idempotent)."""
    import sqlalchemy as sa

    classes, seen = [sa.pool.Pool], set()
    while classes:
        cls = classes.pop()
        classes.extend(cls.__subclasses__())
        name = f"{cls.__module__}.{cls.__name__}"
        if name not in seen:
            seen.add(name)
            pool_log = logging.getLogger(name)
            if _one_line_pool_record not in pool_log.filters:
                pool_log.addFilter(_one_line_pool_record)


# Locations webargs nests errors under; the body is the default, so its prefix is dropped.
_LOCATIONS = ("json", "query", "path", "headers", "view_args", "form", "files", "cookies")


class ApiError(HTTPException):
    """An error to answer with ``status``; ``errors`` is the ``{field: [messages]}`` map."""

    def __init__(self, status: int, message: str, errors: Mapping[str, list[str]] | None = None,
                 headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.code = status
        self.message = message
        self.errors = dict(errors or {})
        self.extra_headers = dict(headers or {})


class FieldErrors(InputError):
    """Bad input with several fields at fault: ``errors`` is the ready ``{field: [messages]}`` map."""

    def __init__(self, message: str, errors: Mapping[str, list[str]]) -> None:
        super().__init__(message, next(iter(errors), None))
        self.errors = dict(errors)

    def as_errors(self) -> dict[str, list[str]]:
        return dict(self.errors)


def release(error: Exception) -> None:
    """Let go of what a marshmallow ``ValidationError`` holds beyond its messages. Its load's frame, on the
    error's own traceback, holds the error: a cycle keeping the parsed body (``error.data`` too) until a full
    collection, which may not come for long (a 19 MB body kept a worker 1.2 GB larger)."""
    error.data = None  # type: ignore[attr-defined]
    error.__traceback__ = None


def flatten_errors(errors: object, prefix: str = "") -> dict[str, list[str]]:
    """Marshmallow's nested error dict as ``{"a.b.0.c": [messages]}``."""
    out: dict[str, list[str]] = {}
    if isinstance(errors, Mapping):
        for key, value in errors.items():
            key = str(key)
            if not prefix and key in _LOCATIONS:
                # The body is the default location, so its fields are named without a prefix.
                path = ("" if isinstance(value, Mapping) else "body") if key == "json" else key
            else:
                path = f"{prefix}.{key}" if prefix else key
            for k, v in flatten_errors(value, path).items():
                out.setdefault(k, []).extend(v)
    elif isinstance(errors, list | tuple):
        if all(isinstance(e, str) for e in errors):
            out[prefix or "_schema"] = [str(e) for e in errors]
        else:
            for item in errors:
                for k, v in flatten_errors(item, prefix).items():
                    out.setdefault(k, []).extend(v)
    elif errors is not None:
        out[prefix or "_schema"] = [str(errors)]
    return out


def _body(status: int, name: str, message: str, errors: Mapping[str, list[str]] | None):
    response = jsonify({"code": status, "status": name, "message": message, "errors": dict(errors or {})})
    response.status_code = status
    return response


def _unavailable(message: str, reason: str, retry_after_s: int):
    """A 503 saying what is wrong with the database (``errors.database``), with ``Retry-After`` in s."""
    response = _body(503, _status_name(503), message, {"database": [reason]})
    response.headers["Retry-After"] = str(retry_after_s)
    return response


def _message(errors: Mapping[str, list[str]], default: str) -> str:
    if not errors:
        return default
    field, messages = next(iter(errors.items()))
    more = f" (and {len(errors) - 1} more field(s))" if len(errors) > 1 else ""
    return f"{field}: {messages[0]}{more}"


def input_error_status(exc: InputError) -> int:
    """404 for a workload that is not stored, 422 for any other bad input."""
    return 404 if isinstance(exc, UnknownWorkloadError) else 422


def register_error_handlers(app: Flask) -> None:
    """Install the JSON error handlers on ``app`` (after flask-smorest, so these win)."""

    @app.errorhandler(ApiError)
    def _api_error(exc: ApiError):
        response = _body(exc.code or 400, _status_name(exc.code or 400), exc.message, exc.errors)
        response.headers.update(exc.extra_headers)
        return response

    @app.errorhandler(InputError)
    def _input_error(exc: InputError):
        status = input_error_status(exc)
        return _body(status, _status_name(status), exc.message, exc.as_errors())

    @app.errorhandler(HTTPException)
    def _http_error(exc: HTTPException):
        status = exc.code or 500
        data = getattr(exc, "data", None) or {}
        errors = flatten_errors(data.get("messages") or data.get("errors") or {})
        if status == 422 and not errors:
            errors = {"_schema": ["invalid request"]}
        default = {
            400: "the request body is not valid JSON" if "JSON" in (exc.description or "")
            else (exc.description or "bad request"),
            413: f"request body is larger than the limit of {app.config.get('MAX_CONTENT_LENGTH')} bytes",
            # Flask-Limiter's description is the limit alone ("3 per 1 minute"): say what it is.
            429: f"rate limit of {exc.description} per client address reached; retry after the Retry-After "
                 "header's seconds",
        }.get(status, exc.description or exc.name)
        message = data.get("message") or (_message(errors, default) if status in (400, 422) else default)
        if status >= 500:
            message = "internal error; see the server log"
        response = _body(status, exc.name, message, errors)
        for key, value in (data.get("headers") or {}).items():
            response.headers[key] = value
        if status == 405 and exc.get_response().headers.get("Allow"):
            response.headers["Allow"] = exc.get_response().headers["Allow"]
        return response

    @app.errorhandler(RecursionError)
    def _too_deep(exc: RecursionError):
        # json.loads (or a validator) ran out of stack on a deeply nested body: bad input, not a fault.
        log.warning("request rejected: nesting too deep (%s)", exc)
        return _body(400, _status_name(400), "the JSON body is nested too deeply",
                     {"body": ["is nested too deeply; profile rows and requests need only a few levels"]})

    @app.errorhandler(OverflowError)
    def _overflow(exc: OverflowError):
        # Finite inputs whose products or sums leave the float range (e.g. deadlines near 1e308).
        log.warning("request rejected: numeric overflow (%s)", exc)
        return _body(422, _status_name(422), "a number in the request is too large to compute with",
                     {"_schema": [f"numeric overflow: {exc}"]})

    @app.errorhandler(Exception)
    def _unexpected(exc: Exception):
        if isinstance(exc, HTTPException):  # pragma: no cover - handled above
            return _http_error(exc)
        if isinstance(exc, ValueError) and "integer string conversion" in str(exc):
            # json.loads refuses integers of more than sys.get_int_max_str_digits() digits (4300): bad input.
            return _body(400, _status_name(400), "a number in the JSON body has too many digits",
                         {"body": [f"integers may have at most {sys.get_int_max_str_digits()} digits"]})
        if isinstance(exc, sqlite_setup.FileMoved):
            log.error("the store cannot write: %s", exc)
            return _unavailable(f"the store cannot write: {exc}", "cannot write: the database file was moved, "
                                "deleted or replaced", STORE_RETRY_AFTER_S)
        reason = write_failure(exc)
        if reason is not None:
            log.error("the store cannot write: %s", reason)
            return _unavailable(f"the store cannot write ({reason}); reads still work, writes fail until an "
                                "operator frees space or makes it writable", f"cannot write: {reason}",
                                STORE_RETRY_AFTER_S)
        storage = getattr(app.extensions.get("jetpredict"), "storage", None)
        where = (storage.location, storage.url) if storage is not None else ("of the service", "")
        fault = store_fault(exc, *where)
        if fault is not None:
            log.error("the database cannot be used: %s", fault[0])
            return _unavailable(fault[0], fault[1], STORE_RETRY_AFTER_S)
        if is_unreachable(exc):
            # The driver's reason, masked, as serve's start-up line says it (not the class name alone).
            log.warning("database unavailable: %s: %s", type(exc).__name__, driver_reason(exc, where[1]),
                        exc_info=log.isEnabledFor(10))
            return _unavailable("the database cannot be reached; retry later", "unreachable", DB_RETRY_AFTER_S)
        log.exception("unhandled error")
        # InternalServerError.name is a property of instances: ask the status table, never the class.
        return _body(500, _status_name(500), "internal error; see the server log", {})


def _status_name(status: int) -> str:
    from werkzeug.http import HTTP_STATUS_CODES

    return HTTP_STATUS_CODES.get(status, "Error")
