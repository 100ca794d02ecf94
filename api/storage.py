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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError

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


class Storage:
    """Profile rows and workload records in one SQL database."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.is_sqlite = url.startswith("sqlite")
        if self.is_sqlite:
            path = sa.engine.make_url(url).database
            if path and path != ":memory:":
                Path(path).parent.mkdir(parents=True, exist_ok=True)
            self.engine: Engine = sa.create_engine(url, connect_args={"timeout": 30})
            sa.event.listen(self.engine, "connect", _sqlite_pragmas)
        else:
            self.engine = sa.create_engine(url, pool_pre_ping=True)
        self._local = threading.local()
        marker = {"qmark": "?", "format": "%s", "pyformat": "%s", "numeric": ":1", "named": ":id",
                  "numeric_dollar": "$1"}[self.engine.dialect.paramstyle]
        self._revision_sql = f"SELECT revision FROM workloads WHERE id = {marker}"

    def create_schema(self) -> None:
        """Create missing tables (idempotent; safe when several workers start at once)."""
        try:
            metadata.create_all(self.engine)
        except sa.exc.OperationalError:
            # Another worker created them between our check and our CREATE.
            metadata.create_all(self.engine)

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
    def add_upload(self, workload_id: str, device: str, rows: Sequence[Mapping[str, object]],
                   expected_revision: int, fit: Mapping[str, object]) -> WorkloadRecord:
        """Store ``rows`` as one upload and bump the revision, all in one transaction.

        ``expected_revision`` is the revision the caller fitted against (0 = new workload);
        :class:`RevisionConflict` if another upload got there first.
        """
        try:
            with self.engine.begin() as conn:
                # The first statement writes, so SQLite takes its write lock (waiting up to busy_timeout)
                # before anything is read in this transaction.
                return self._write_upload(conn, workload_id, device, rows, expected_revision, fit)
        except IntegrityError:
            raise RevisionConflict(workload_id) from None

    def add_upload_locked(self, workload_id: str, device: str, rows: Sequence[Mapping[str, object]],
                          refit: Callable[[list[dict]], Mapping[str, object]]) -> WorkloadRecord:
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
                return self._write_upload(conn, workload_id, device, rows, int(revision), fit)
        except IntegrityError:
            raise RevisionConflict(workload_id) from None

    def _write_upload(self, conn: sa.Connection, workload_id: str, device: str,
                      rows: Sequence[Mapping[str, object]], expected_revision: int,
                      fit: Mapping[str, object]) -> WorkloadRecord:
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
        record = conn.execute(sa.select(workloads).where(workloads.c.id == workload_id)).one()
        return self._record(record)

    def delete_workload(self, workload_id: str) -> bool:
        """Delete a workload with its rows and uploads; False if it was not stored."""
        with self.engine.begin() as conn:
            conn.execute(profile_rows.delete().where(profile_rows.c.workload_id == workload_id))
            conn.execute(uploads.delete().where(uploads.c.workload_id == workload_id))
            done = conn.execute(workloads.delete().where(workloads.c.id == workload_id))
        return done.rowcount == 1
