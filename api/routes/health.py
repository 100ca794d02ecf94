"""``GET /healthz`` (liveness and database check) and ``GET /metrics`` (Prometheus)."""

from __future__ import annotations

import functools
import logging
import os
import shutil
import time
from pathlib import Path

import sqlalchemy as sa
from flask.views import MethodView
from jetpredict.api import sqlite_setup
from jetpredict.api.database_url import driver_reason
from jetpredict.api.errors import damaged_message, store_fault
from jetpredict.api.routes.common import Blueprint, services
from jetpredict.api.schemas import HealthSchema
from jetpredict.api.storage import Storage
from jetpredict.api.store_failures import StoreRefused, write_failure
from jetpredict.models.catalogue import device_ids

blp = Blueprint("health", __name__, description="Service health and metrics")
#: Free bytes under the SQLite file below which the store counts as full (one upload can take ~1 MB).
MIN_FREE_BYTES = 16 * 1024 * 1024
log = logging.getLogger("jetpredict.api")


@functools.cache
def _version() -> str:
    # Reading the installed metadata parses a file (~1 ms): once per process is enough.
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("jetpredict")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "unknown"


def _plain_sqlite_file(storage: Storage) -> str | None:
    """The SQLite file's path, None where it is a ``file:`` URI, not a path on disk."""
    path = storage.sqlite_file
    return None if path is None or path.startswith("file:") else path


def store_write_problem(storage: Storage) -> str | None:
    """Why the store cannot write now (``disk full: ...``, ``read-only: ...``), or None.

    SQLite: the free space of the file's file system (under :data:`MIN_FREE_BYTES` = full). Every
    database: an UPDATE that matches no row, rolled back: it takes the write lock, so a read-only file,
    a read-only transaction or a hot standby refuses it, yet nothing is written.
    """
    path = _plain_sqlite_file(storage)
    if path:
        folder = Path(path).parent
        free = shutil.disk_usage(folder).free
        if free < MIN_FREE_BYTES:
            return f"disk full: {free} bytes free under {folder}"
    try:
        with storage.engine.connect() as conn, conn.begin() as transaction:
            conn.execute(sa.text("UPDATE workloads SET revision = revision WHERE 1 = 0"))
            transaction.rollback()
    except sa.exc.SQLAlchemyError as exc:
        reason = write_failure(exc)
        if reason is None:
            raise
        return f"{reason}: {type(exc.orig if isinstance(exc, sa.exc.DBAPIError) else exc).__name__}"
    return None


#: Seconds between two ``quick_check`` runs of one file in a process: the check reads every page (0.15 s on a
#: 310 MB file), so a busy service's probes do not repeat it after each write.
QUICK_CHECK_INTERVAL_S = 60.0
#: The clock of that interval (monotonic seconds).
_now = time.monotonic
#: SQLite file -> (its state: size and mtime of the file and its WAL, when ``quick_check`` last ran on it and
#: found it sound): the check runs again once the file changed and the interval passed.
_checked_sound: dict[str, tuple[tuple, float]] = {}


def _file_state(path: str) -> tuple:
    """(size, mtime) of the SQLite file and of its WAL where one is; OSError where the file cannot be read."""
    main = os.stat(path)
    try:
        wal = os.stat(f"{path}-wal")
    except FileNotFoundError:  # no WAL, or the last connection elsewhere just removed it
        return main.st_size, main.st_mtime_ns
    return main.st_size, main.st_mtime_ns, wal.st_size, wal.st_mtime_ns


def sqlite_damage(storage: Storage, conn: sa.Connection) -> str | None:
    """What ``PRAGMA quick_check`` finds wrong in a SQLite file (None: sound, or not a SQLite file); OSError
    where the file is gone (moved aside: the pool's connections still read the old one)."""
    path = _plain_sqlite_file(storage)
    if not path:
        return None
    state = _file_state(path)
    last = _checked_sound.get(path)
    if last is not None and (last[0] == state or _now() - last[1] < QUICK_CHECK_INTERVAL_S):
        return None
    problem = sqlite_setup.quick_check(conn)
    if problem is None:
        _checked_sound[path] = (state, _now())
    return problem


@blp.route("/healthz")
class Health(MethodView):
    @blp.response(200, HealthSchema)
    @blp.alt_response(503, schema=HealthSchema, description="the database cannot be reached")
    def get(self):
        """Liveness: the service answers, its database is reachable and sound (SQLite: ``quick_check``), and
        its store can write (503 and ``degraded`` otherwise; ``database`` says what is wrong, ``store`` why
        it cannot write: disk full or read-only)."""
        storage = services().storage
        store, status = "unknown", 503
        try:
            storage.check_file()  # deleted or replaced: writes are refused (api.sqlite_setup.FileMoved)
            with storage.engine.connect() as conn:
                conn.execute(sa.text("SELECT 1"))
                damage = sqlite_damage(storage, conn)
            if damage is not None:
                database = damaged_message(storage.location, damage)
                log.error("health check: %s", database)
            else:
                database, status = "ok", 200
                problem = store_write_problem(storage)
                store = "ok" if problem is None else f"cannot write: {problem}"
                if problem is not None:
                    log.warning("health check: the store cannot write: %s", problem)
                    status = 503
        except OSError as exc:  # the pool's connections still read a file moved aside; a restart opens anew
            moved = exc if isinstance(exc, sqlite_setup.FileMoved) else sqlite_setup.moved_aside(storage.location, exc)
            database = f"unreachable: {moved}"
            log.error("health check: database %s", database)
        except (sa.exc.SQLAlchemyError, StoreRefused) as exc:
            fault = store_fault(exc, storage.location, storage.url)
            reason = f"{type(exc).__name__}: {driver_reason(exc, storage.url)}"  # masked, as serve's start line
            log.warning("health check: database %s: %s", "unusable" if fault else "unreachable", reason)
            database = fault[0] if fault else f"unreachable: {reason}"
        body = {"status": "ok" if status == 200 else "degraded", "version": _version(),
                "database": database, "store": store, "devices": len(device_ids())}
        return body, status


@blp.route("/metrics")
class PrometheusMetrics(MethodView):
    @blp.doc(responses={"200": {"description": "Prometheus text exposition format",
                                "content": {"text/plain": {"schema": {"type": "string"}}}}})
    def get(self):
        """Request counts and latencies per route, predictions served (Prometheus text format)."""
        return services().metrics.exposition()
