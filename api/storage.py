"""Storage of uploaded profile rows and fitted-workload summaries (SQLAlchemy 2 Core).

A SQLite file by default (WAL journal, ``synchronous=FULL``, so an answered upload survives a SIGKILL),
any PostgreSQL by URL. Each upload is one transaction: its rows, its upload record and the workload's
new revision commit together or not at all. Concurrent uploads to one workload are serialised by an
optimistic revision check (a conditional ``UPDATE``), which works the same on SQLite and PostgreSQL.
Fitted models themselves are never stored as pickles; they are rebuilt from the rows (``api.workloads``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: SQLite's own locking and the retry remain
    fcntl = None  # type: ignore[assignment]

metadata = sa.MetaData()

workloads = sa.Table(
    "workloads", metadata,
    sa.Column("id", sa.String(200), primary_key=True),
    sa.Column("device", sa.String(32), nullable=False),
    sa.Column("revision", sa.Integer, nullable=False),
    sa.Column("rows_stored", sa.Integer, nullable=False),
    sa.Column("fit", sa.JSON, nullable=False),  # summary of the last fit (model_version, ...)
    sa.Column("created_at", sa.String(40), nullable=False),
    sa.Column("updated_at", sa.String(40), nullable=False),
)

uploads = sa.Table(
    "uploads", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("workload_id", sa.String(200), sa.ForeignKey("workloads.id", ondelete="CASCADE"),
              nullable=False, index=True),
    sa.Column("revision", sa.Integer, nullable=False),
    sa.Column("rows", sa.Integer, nullable=False),
    sa.Column("sha256", sa.String(64), nullable=False),
    sa.Column("created_at", sa.String(40), nullable=False),
)

profile_rows = sa.Table(
    "profile_rows", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("workload_id", sa.String(200), sa.ForeignKey("workloads.id", ondelete="CASCADE"),
              nullable=False, index=True),
    sa.Column("upload_id", sa.Integer, sa.ForeignKey("uploads.id", ondelete="CASCADE"), nullable=False),
    sa.Column("data", sa.JSON, nullable=False),  # one validated profile row (NaN stored as null)
)


class RevisionConflict(Exception):
    """The workload changed between reading its rows and writing the new upload; retry."""


@dataclass(frozen=True)
class WorkloadRecord:
    """A stored workload: its device, revision (uploads so far), row count and last fit summary."""

    id: str
    device: str
    revision: int
    rows_stored: int
    fit: dict
    created_at: str
    updated_at: str


#: One row per upload: the key it was made under (the client's ``Idempotency-Key``, or the SHA-256 of its
#: rows when it sent none), the hash of the request, and the answer given, replayed to a retry.
idempotency = sa.Table(
    "idempotency", metadata,
    sa.Column("key", sa.String(240), primary_key=True),
    sa.Column("workload_id", sa.String(200), sa.ForeignKey("workloads.id", ondelete="CASCADE"),
              nullable=False, index=True),
    sa.Column("request_sha256", sa.String(64), nullable=False),
    sa.Column("response", sa.JSON, nullable=False),
    sa.Column("created_at", sa.String(40), nullable=False),
)


def upload_result(record: WorkloadRecord, rows_stored: int) -> dict[str, object]:
    """The JSON answer to an upload (``POST /v1/profiles`` 201), kept for idempotent replays."""
    fit = record.fit or {}
    return {"workload_id": record.id, "rows_stored": rows_stored, "rows_total": record.rows_stored,
            "revision": record.revision, "device": record.device,
            **{k: fit.get(k) for k in ("model_version", "reference_source", "profiled_modes", "has_power")}}


@dataclass(frozen=True)
class IdempotencyKey:
    """The key an upload is made under and the SHA-256 of its request body."""

    key: str
    request_sha256: str


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def _sqlite_pragmas(dbapi_connection, _record) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA busy_timeout=30000")  # first, so the pragmas below wait for other workers
    cursor.execute("PRAGMA journal_mode=WAL")
    # FULL: an answered commit is on disk before the 201 goes out (SIGKILL or power loss).
    cursor.execute("PRAGMA synchronous=FULL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


#: Any constant: the key of the PostgreSQL advisory lock that serialises schema creation ("jetp").
SCHEMA_LOCK_KEY = 0x6A657470
_SCHEMA_TRIES = 5


def normalize_url(url: str) -> str:
    """``postgresql://`` / ``postgres://`` with the driver that is installed (psycopg 3, else psycopg2)."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in ("postgresql", "postgres"):
        return url
    import importlib.util

    driver = "psycopg" if importlib.util.find_spec("psycopg") else "psycopg2"
    return f"postgresql+{driver}://{rest}"


def masked_url(url: str) -> str:
    """``url`` safe to print: the password is hidden, in the user part and in query parameters."""
    try:
        parsed = sa.engine.make_url(url)
    except sa.exc.ArgumentError:
        return "<unparseable database URL>"
    query = {k: ("***" if "pass" in k.lower() or "secret" in k.lower() or "token" in k.lower() else v)
             for k, v in parsed.query.items()}
    return parsed.set(query=query).render_as_string(hide_password=True)


def is_unreachable(exc: BaseException) -> bool:
    """True for errors that mean "the database cannot be used now" (down, refused, locked, pool empty)."""
    if isinstance(exc, sa.exc.TimeoutError | sa.exc.DisconnectionError):
        return True
    if isinstance(exc, sa.exc.DBAPIError):
        return bool(exc.connection_invalidated) or isinstance(exc, sa.exc.OperationalError | sa.exc.InterfaceError)
    return False


class Storage:
    """Profile rows and workload records in one SQL database."""

    def __init__(self, url: str) -> None:
        url = normalize_url(url)
        self.url = url
        self.is_sqlite = url.startswith("sqlite")
        self.is_postgresql = url.startswith("postgresql")
        if self.is_sqlite:
            path = sa.engine.make_url(url).database
            if path and path != ":memory:":
                Path(path).parent.mkdir(parents=True, exist_ok=True)
            self.engine: Engine = sa.create_engine(url, connect_args={"timeout": 30})
            sa.event.listen(self.engine, "connect", _sqlite_pragmas)
        else:
            # connect_timeout: a database that is down answers 503 within seconds, not after the TCP timeout.
            args = {"connect_timeout": 5} if self.is_postgresql else {}
            self.engine = sa.create_engine(url, pool_pre_ping=True, connect_args=args)
        self._local = threading.local()
        marker = {"qmark": "?", "format": "%s", "pyformat": "%s", "numeric": ":1", "named": ":id",
                  "numeric_dollar": "$1"}[self.engine.dialect.paramstyle]
        self._revision_sql = f"SELECT revision FROM workloads WHERE id = {marker}"

    def create_schema(self) -> None:
        """Create missing tables; idempotent and safe when several processes boot at once.

        PostgreSQL: a transaction-scoped advisory lock around ``create_all`` (two concurrent
        ``CREATE TABLE`` of one name collide in the catalogue even with ``IF NOT EXISTS``). SQLite: an
        exclusive lock file beside the database, then ``create_all``, retried on "already exists".
        """
        if self.is_postgresql:
            with self.engine.begin() as conn:
                conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": SCHEMA_LOCK_KEY})
                metadata.create_all(conn)
            return
        with self._file_lock():
            for attempt in range(_SCHEMA_TRIES):
                try:
                    metadata.create_all(self.engine)
                    return
                except sa.exc.OperationalError:
                    # Another process (without our lock file: an older version) created them meanwhile.
                    if attempt == _SCHEMA_TRIES - 1:
                        raise
                    time.sleep(0.05 * (attempt + 1))

    @contextlib.contextmanager
    def _file_lock(self):
        path = sa.engine.make_url(self.url).database if self.is_sqlite else None
        if not path or path == ":memory:" or fcntl is None:
            yield
            return
        with open(f"{path}.schema-lock", "a+b") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def dispose(self) -> None:
        raw = getattr(self._local, "raw", None)
        if raw is not None:
            self._local.raw = None
            with contextlib.suppress(Exception):
                raw.close()
        self.engine.dispose()

    # -- reads -------------------------------------------------------------------------------------
    @staticmethod
    def _record(row: sa.Row) -> WorkloadRecord:
        fit = row.fit if isinstance(row.fit, dict) else json.loads(row.fit or "{}")
        return WorkloadRecord(row.id, row.device, row.revision, row.rows_stored, fit, row.created_at,
                              row.updated_at)

    def get_workload(self, workload_id: str) -> WorkloadRecord | None:
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(workloads).where(workloads.c.id == workload_id)).first()
        return None if row is None else self._record(row)

    def revision(self, workload_id: str) -> int | None:
        """The workload's revision (checked before every use of a cached model), None if not stored.

        This runs on every prediction, so it uses one raw DB-API connection per thread (~20 us on SQLite,
        against ~0.5 ms through a pooled SQLAlchemy connection); any driver error falls back to the pool.
        """
        raw = getattr(self._local, "raw", None)
        try:
            if raw is None:
                raw = self._local.raw = self.engine.raw_connection()
            cursor = raw.cursor()
            try:
                cursor.execute(self._revision_sql, (workload_id,))
                row = cursor.fetchone()
            finally:
                cursor.close()
            raw.rollback()  # end the read, so no snapshot (PostgreSQL) outlives this call
            return None if row is None else int(row[0])
        except Exception:  # a broken connection: forget it and use the pool this time
            self._local.raw = None
            with contextlib.suppress(Exception):
                raw.close()
            with self.engine.connect() as conn:
                return conn.execute(sa.select(workloads.c.revision).where(workloads.c.id == workload_id)).scalar()

    def list_workloads(self, limit: int, offset: int) -> tuple[int, list[WorkloadRecord]]:
        with self.engine.connect() as conn:
            total = conn.execute(sa.select(sa.func.count()).select_from(workloads)).scalar_one()
            rows = conn.execute(sa.select(workloads).order_by(workloads.c.id).limit(limit).offset(offset))
            return int(total), [self._record(r) for r in rows]

    def load_rows(self, workload_id: str) -> tuple[int | None, list[dict]]:
        """(revision, rows in upload order) read in one snapshot; (None, []) if not stored."""
        with self.engine.connect() as conn, conn.begin():
            revision = conn.execute(
                sa.select(workloads.c.revision).where(workloads.c.id == workload_id)).scalar()
            if revision is None:
                return None, []
            data = conn.execute(sa.select(profile_rows.c.data).where(profile_rows.c.workload_id == workload_id)
                                .order_by(profile_rows.c.id)).scalars().all()
        return int(revision), [d if isinstance(d, dict) else json.loads(d) for d in data]

    def count_rows(self, workload_id: str | None = None) -> int:
        query = sa.select(sa.func.count()).select_from(profile_rows)
        if workload_id is not None:
            query = query.where(profile_rows.c.workload_id == workload_id)
        with self.engine.connect() as conn:
            return int(conn.execute(query).scalar_one())

    # -- writes ------------------------------------------------------------------------------------
    def find_idempotent(self, key: str) -> tuple[str, dict] | None:
        """``(request_sha256, response)`` of the upload made under ``key``, or None."""
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(idempotency.c.request_sha256, idempotency.c.response)
                               .where(idempotency.c.key == key)).first()
        if row is None:
            return None
        response = row.response if isinstance(row.response, dict) else json.loads(row.response)
        return row.request_sha256, response

    def add_upload(self, workload_id: str, device: str, rows: Sequence[Mapping[str, object]],
                   expected_revision: int, fit: Mapping[str, object],
                   idem: IdempotencyKey | None = None) -> WorkloadRecord:
        """Store ``rows`` as one upload and bump the revision, all in one transaction.

        ``expected_revision`` is the revision the caller fitted against (0 = new workload);
        :class:`RevisionConflict` if another upload got there first.
        """
        try:
            with self.engine.begin() as conn:
                # The first statement writes, so SQLite takes its write lock (waiting up to busy_timeout)
                # before anything is read in this transaction.
                return self._write_upload(conn, workload_id, device, rows, expected_revision, fit, idem)
        except IntegrityError:
            raise RevisionConflict(workload_id) from None

    def add_upload_locked(self, workload_id: str, device: str, rows: Sequence[Mapping[str, object]],
                          refit: Callable[[list[dict]], Mapping[str, object]],
                          idem: IdempotencyKey | None = None) -> WorkloadRecord:
        """Like :meth:`add_upload`, but holding the write lock while ``refit(stored_rows)`` runs.

        For a workload that many clients upload to at once, where optimistic retries keep losing:
        the writers queue instead. ``refit`` returns the fit summary or raises (nothing is stored).
        """
        try:
            with self.engine.begin() as conn:
                # A no-op write first: SQLite's write lock, or PostgreSQL's row lock, before the read.
                conn.execute(workloads.update().where(workloads.c.id == workload_id)
                             .values(revision=workloads.c.revision))
                revision = conn.execute(
                    sa.select(workloads.c.revision).where(workloads.c.id == workload_id)).scalar() or 0
                stored = [d if isinstance(d, dict) else json.loads(d) for d in conn.execute(
                    sa.select(profile_rows.c.data).where(profile_rows.c.workload_id == workload_id)
                    .order_by(profile_rows.c.id)).scalars()]
                fit = refit(stored)
                return self._write_upload(conn, workload_id, device, rows, int(revision), fit, idem)
        except IntegrityError:
            raise RevisionConflict(workload_id) from None

    def _write_upload(self, conn: sa.Connection, workload_id: str, device: str,
                      rows: Sequence[Mapping[str, object]], expected_revision: int,
                      fit: Mapping[str, object], idem: IdempotencyKey | None = None) -> WorkloadRecord:
        now = _now()
        payload = json.dumps(list(rows), sort_keys=True, default=str).encode()
        if expected_revision == 0:
            conn.execute(workloads.insert().values(
                id=workload_id, device=device, revision=1, rows_stored=len(rows), fit=dict(fit),
                created_at=now, updated_at=now))
        else:
            done = conn.execute(
                workloads.update()
                .where(workloads.c.id == workload_id, workloads.c.revision == expected_revision)
                .values(revision=expected_revision + 1, rows_stored=workloads.c.rows_stored + len(rows),
                        fit=dict(fit), updated_at=now))
            if done.rowcount != 1:
                raise RevisionConflict(workload_id)
        upload_id = conn.execute(uploads.insert().values(
            workload_id=workload_id, revision=expected_revision + 1, rows=len(rows),
            sha256=hashlib.sha256(payload).hexdigest(), created_at=now)).inserted_primary_key[0]
        conn.execute(profile_rows.insert(), [
            {"workload_id": workload_id, "upload_id": upload_id, "data": dict(r)} for r in rows])
        record = self._record(conn.execute(sa.select(workloads).where(workloads.c.id == workload_id)).one())
        if idem is not None:
            # Same transaction: an upload committed while its client saw a broken connection is found by
            # the retry. A concurrent twin with the same key fails here (primary key) and replays.
            conn.execute(idempotency.insert().values(
                key=idem.key, workload_id=workload_id, request_sha256=idem.request_sha256,
                response=upload_result(record, len(rows)), created_at=now))
        return record

    def delete_workload(self, workload_id: str) -> bool:
        """Delete a workload with its rows and uploads; False if it was not stored."""
        with self.engine.begin() as conn:
            conn.execute(idempotency.delete().where(idempotency.c.workload_id == workload_id))
            conn.execute(profile_rows.delete().where(profile_rows.c.workload_id == workload_id))
            conn.execute(uploads.delete().where(uploads.c.workload_id == workload_id))
            done = conn.execute(workloads.delete().where(workloads.c.id == workload_id))
        return done.rowcount == 1
