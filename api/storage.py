"""Storage of uploaded profile rows and fitted-workload summaries (SQLAlchemy 2 Core).

A SQLite file by default (WAL journal, ``synchronous=FULL``, so an answered upload survives a SIGKILL),
any PostgreSQL by URL. Each upload is one transaction: the rows of every workload it holds, their upload
records and the workloads' new revisions commit together or not at all. Concurrent uploads to one workload
are serialised by an optimistic revision check (a conditional ``UPDATE``), which works the same on SQLite
and PostgreSQL.
Fitted models themselves are never stored as pickles; they are rebuilt from the rows (``api.workloads``).

A workload may hold rows of several device types. ``workloads.device`` is the device of its first rows
(the default of requests that name none); ``workloads.fit`` holds that device's fit summary at its top, as
it always did, and every device's under ``devices`` (``{device: {rows, model_version, ...}}``). A record
written before workloads held several devices has no ``devices`` key and reads as one device
(:func:`device_fits`), so existing databases need no migration.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import sqlalchemy as sa
from jetpredict.api import sqlite_setup
from jetpredict.api.config import MAX_WORKLOAD_ID_CHARS
from jetpredict.api.database_url import checked_url
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: SQLite's own locking and the retry remain
    fcntl = None  # type: ignore[assignment]

metadata = sa.MetaData()

workloads = sa.Table(
    "workloads", metadata,
    sa.Column("id", sa.String(MAX_WORKLOAD_ID_CHARS), primary_key=True),
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
    sa.Column("workload_id", sa.String(MAX_WORKLOAD_ID_CHARS), sa.ForeignKey("workloads.id", ondelete="CASCADE"),
              nullable=False, index=True),
    sa.Column("revision", sa.Integer, nullable=False),
    sa.Column("rows", sa.Integer, nullable=False),
    sa.Column("sha256", sa.String(64), nullable=False),
    sa.Column("created_at", sa.String(40), nullable=False),
)

profile_rows = sa.Table(
    "profile_rows", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("workload_id", sa.String(MAX_WORKLOAD_ID_CHARS), sa.ForeignKey("workloads.id", ondelete="CASCADE"),
              nullable=False, index=True),
    sa.Column("upload_id", sa.Integer, sa.ForeignKey("uploads.id", ondelete="CASCADE"), nullable=False),
    sa.Column("data", sa.JSON, nullable=False),  # one validated profile row (NaN stored as null)
)


#: The last revision of each deleted workload id. An id uploaded again continues from it, so a revision never
#: names two states of one id: every worker's cached model and a client's copy are checked by revision alone
#: (a delete and a new upload that restarted at 1 would pass that check with the deleted rows' model). A
#: table added to deployed databases by ``create_schema`` (``create_all`` adds missing tables).
deleted_revisions = sa.Table(
    "deleted_revisions", metadata,
    sa.Column("workload_id", sa.String(MAX_WORKLOAD_ID_CHARS), primary_key=True),
    sa.Column("revision", sa.Integer, nullable=False),
)


def _insert_placeholder(conn: sa.Connection, workload_id: str, device: str, now: str) -> None:
    """A workload row at revision 0 with no rows: it holds the id (its key) for this transaction, before the
    id's deleted revision or stored rows are read."""
    conn.execute(workloads.insert().values(id=workload_id, device=device, revision=0, rows_stored=0, fit={},
                                           created_at=now, updated_at=now))


def _last_deleted_revision(conn: sa.Connection, workload_id: str) -> int:
    """The revision ``workload_id`` had when it was last deleted (0 if it never was): a new workload of that
    id counts on from it. Read it only while this transaction holds the id's row (a placeholder)."""
    return conn.execute(sa.select(deleted_revisions.c.revision)
                        .where(deleted_revisions.c.workload_id == workload_id)).scalar() or 0


class RevisionConflict(Exception):
    """The workload changed between reading its rows and writing the new upload; retry."""


#: The fields of a fit summary (``api.workloads.fit_summary``) kept per device.
FIT_FIELDS = ("model_version", "reference_source", "workload_source", "profiled_modes", "has_power",
              "aliased_knobs")


def stored_fit_fields(fit: Mapping[str, object]) -> dict[str, object]:
    """The :data:`FIT_FIELDS` of a fit stored by the upload path (None for a field an older fit lacks)."""
    return {k: fit.get(k) for k in FIT_FIELDS}


@dataclass(frozen=True)
class WorkloadRecord:
    """A stored workload: the device of its first rows, revision (uploads that stored rows in it, counted
    on from a deleted workload of the same id), row count and fit summaries (see :func:`device_fits` for
    every device's)."""

    id: str
    device: str
    revision: int
    rows_stored: int
    fit: dict
    created_at: str
    updated_at: str

    @property
    def devices(self) -> list[str]:
        """The device ids the workload holds rows of, sorted."""
        return sorted(device_fits(self))


def device_fits(record: WorkloadRecord) -> dict[str, dict]:
    """``{device: {"rows": n, **stored_fit_fields(fit)}}`` of a record;
    a record stored before workloads held several devices reads as its one device."""
    fit = record.fit or {}
    per_device = fit.get("devices")
    if isinstance(per_device, dict) and per_device:
        return {str(k): dict(v) for k, v in per_device.items() if isinstance(v, dict)}
    return {record.device: {"rows": record.rows_stored, **stored_fit_fields(fit)}}


def _merged_fit(old: Mapping[str, object], primary: str, rows_stored: int, device: str, rows: int,
                fit: Mapping[str, object]) -> dict:
    """The ``fit`` column after an upload of ``rows`` rows of ``device`` fitted to ``fit``: that device's
    entry replaced (its rows counted on), the top-level summary replaced when it is the primary device."""
    before = WorkloadRecord("", primary, 0, rows_stored, dict(old), "", "")
    per_device = device_fits(before) if old else {}
    done = per_device.get(device, {}).get("rows") or 0
    per_device[device] = {"rows": int(done) + rows, **stored_fit_fields(fit)}
    top = dict(fit) if device == primary or not old else {k: v for k, v in old.items() if k != "devices"}
    return {**top, "devices": per_device}


#: One row per workload of an upload (columns unchanged since single-workload uploads, so deployed
#: databases need no migration; see :class:`IdempotencyKey` for the keys), holding the hash of the request
#: and the answer given (whole under the first key), replayed to a retry.
idempotency = sa.Table(
    "idempotency", metadata,
    sa.Column("key", sa.String(240), primary_key=True),
    sa.Column("workload_id", sa.String(MAX_WORKLOAD_ID_CHARS), sa.ForeignKey("workloads.id", ondelete="CASCADE"),
              nullable=False, index=True),
    sa.Column("request_sha256", sa.String(64), nullable=False),
    sa.Column("response", sa.JSON, nullable=False),
    sa.Column("created_at", sa.String(40), nullable=False),
)


def workload_result(record: WorkloadRecord, rows_stored: int, device: str | None = None) -> dict[str, object]:
    """What an upload did to one workload: rows it stored there, the workload's rows, revision, devices,
    and the fit of the upload's ``device`` (default: the workload's first device)."""
    device = device or record.device
    fits = device_fits(record)
    fit = fits.get(device) or fits.get(record.device) or {}
    return {"workload_id": record.id, "rows_stored": rows_stored, "rows_total": record.rows_stored,
            "revision": record.revision, "device": device if device in fits else record.device,
            "devices": sorted(fits), **stored_fit_fields(fit)}


def upload_result(results: Sequence[tuple[WorkloadRecord, int]], device: str | None = None) -> dict[str, object]:
    """The JSON answer to an upload (``POST /v1/profiles`` 201), kept for idempotent replays.

    ``results``: (record, rows stored by this upload) per workload, in the upload's order; ``device``:
    the upload's device. The top-level fields describe the first workload, so a single-workload upload
    answers as it always did; ``workloads`` lists every workload of the upload.
    """
    each = [workload_result(record, n, device) for record, n in results]
    return {**each[0], "workloads": each}


@dataclass(frozen=True)
class IdempotencyKey:
    """The key an upload is made under and the SHA-256 of its request body.

    An upload of ``n`` workloads is recorded under ``n`` keys, one per workload (:meth:`keys`: ``key`` for
    the first, ``key#1`` ... ``key#n-1`` for the others, in the upload's order), each row tied to its
    workload by ``workload_id``; the first holds the whole answer. Deleting a workload deletes its row, so a
    retry finds the upload intact (every key present: the original answer is replayed) or sees which
    workloads lost their part of it (their keys are missing: only those parts are stored again, and the
    others are not stored twice). Derived keys keep the table's columns as they were and the first key is
    the one a single-workload upload has always used.
    """

    key: str
    request_sha256: str

    def keys(self, n: int) -> list[str]:
        """The keys of an upload of ``n`` workloads, in the upload's order."""
        return [self.key, *(f"{self.key}#{i}" for i in range(1, n))]


@dataclass(frozen=True)
class WorkloadWrite:
    """One workload's part of an upload: its rows and the fit of the workload with them.

    Empty ``rows``: this part was stored by an earlier try of the same upload (its idempotency key is
    present); nothing is written, the workload's record is read for the answer.
    ``expected_revision`` is the revision the fit was made against (0 = a new workload, whose first
    revision follows its id's last deleted one, :data:`deleted_revisions`).
    """

    workload_id: str
    device: str
    rows: Sequence[Mapping[str, object]]
    expected_revision: int
    fit: Mapping[str, object]


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


#: PostgreSQL's collation of ICU's root locale (created by initdb on servers built with ICU): its
#: ``lower`` folds every letter whatever the database's locale.
ICU_ROOT_COLLATION = "und-x-icu"

#: Any constant: the key of the PostgreSQL advisory lock that serialises schema creation ("jetp").
SCHEMA_LOCK_KEY = 0x6A657470
_SCHEMA_TRIES = 5


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
        url = checked_url(url)
        self.url = url
        self.is_sqlite = url.startswith("sqlite")
        self.is_postgresql = url.startswith("postgresql")
        if self.is_sqlite:
            path = sa.engine.make_url(url).database
            if path and path != ":memory:":
                Path(path).parent.mkdir(parents=True, exist_ok=True)
            self.engine: Engine = sa.create_engine(url, connect_args={"timeout": 30})
            sqlite_setup.configure(self.engine)
        else:
            # connect_timeout: a database that is down answers 503 within seconds, not after the TCP timeout.
            args = {"connect_timeout": 5} if self.is_postgresql else {}
            self.engine = sa.create_engine(url, pool_pre_ping=True, connect_args=args)
        self._local = threading.local()
        self._icu_collation: str | None = None  # PostgreSQL: ICU_ROOT_COLLATION, "" if absent; None: not asked
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

    @contextlib.contextmanager
    def _writing(self) -> Iterator[sa.Connection]:
        """A write transaction (committed when the block ends without an exception); on SQLite it holds
        the database's write lock from its start (:func:`api.sqlite_setup.begin`)."""
        with self.engine.connect() as conn:
            conn.execution_options(**{sqlite_setup.WRITE_OPTION: True})
            with conn.begin():
                yield conn

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

    def list_workloads(self, limit: int, offset: int, search: str | None = None
                       ) -> tuple[int, list[WorkloadRecord]]:
        """(matching workloads, a page of them by id); ``search``: ids containing it, case-insensitive
        (for every letter, not only ASCII's, on both databases)."""
        with self.engine.connect() as conn:
            where = []
            if search:
                # '%', '_' (and the escape '/') in the text are matched as themselves, not as LIKE wildcards
                pattern = "%" + search.replace("/", "//").replace("%", "/%").replace("_", "/_") + "%"
                lower = self._unicode_lower(conn)
                where = [lower(workloads.c.id).like(lower(sa.literal(pattern)), escape="/")]
            total = conn.execute(sa.select(sa.func.count()).select_from(workloads).where(*where)).scalar_one()
            rows = conn.execute(sa.select(workloads).where(*where).order_by(workloads.c.id)
                                .limit(limit).offset(offset))
            return int(total), [self._record(r) for r in rows]

    def _unicode_lower(self, conn: sa.Connection) -> Callable[[sa.ColumnElement], sa.ColumnElement]:
        """SQL that lower-cases text over all of Unicode. SQLite: its ``lower``, which this module
        replaces (:mod:`api.sqlite_setup`). PostgreSQL's ``lower`` follows the database's LC_CTYPE, which
        folds ASCII only under the C locale (``initdb --locale=C``): there, ICU's root collation, where the
        server has it."""
        if not self.is_postgresql:
            return sa.func.lower
        if self._icu_collation is None:
            found = conn.execute(sa.text("SELECT 1 FROM pg_collation WHERE collname = :name"),
                                 {"name": ICU_ROOT_COLLATION}).first()
            self._icu_collation = ICU_ROOT_COLLATION if found else ""
        collation = self._icu_collation
        return (lambda expr: sa.func.lower(expr.collate(collation))) if collation else sa.func.lower

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
    def find_idempotent(self, keys: Sequence[str]) -> dict[str, tuple[str, dict]]:
        """``{key: (request_sha256, response)}`` of those of ``keys`` an upload was made under."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(idempotency.c.key, idempotency.c.request_sha256, idempotency.c.response)
                .where(idempotency.c.key.in_(list(keys)))).all()
        return {row.key: (row.request_sha256,
                          row.response if isinstance(row.response, dict) else json.loads(row.response))
                for row in rows}

    def add_uploads(self, writes: Sequence[WorkloadWrite], idem: IdempotencyKey | None = None,
                    replaced_keys: Sequence[str] = ()) -> list[WorkloadRecord]:
        """Store every workload's part of one upload and bump their revisions, all in one transaction.

        :class:`RevisionConflict` if another upload changed any of the workloads since its rows were read
        (or a twin of this upload committed first): nothing is stored. ``replaced_keys``: idempotency rows
        of an earlier try of this upload, rewritten with the new answer.
        """
        try:
            with self._writing() as conn:
                return self._write_uploads(conn, writes, idem, replaced_keys)
        except IntegrityError:
            raise RevisionConflict(", ".join(w.workload_id for w in writes)) from None

    def add_uploads_locked(self, workload_ids: Sequence[str], device: str,
                           refit: Callable[[dict[str, tuple[int, list[dict]]]], Sequence[WorkloadWrite]],
                           idem: IdempotencyKey | None = None,
                           replaced_keys: Sequence[str] = ()) -> list[WorkloadRecord]:
        """Like :meth:`add_uploads`, but holding the write locks of ``workload_ids`` while ``refit`` runs.

        For workloads that many clients upload to at once, where optimistic retries keep losing: the
        writers queue instead. ``refit({id: (revision, stored rows)})`` (revision 0: not stored) returns
        the writes, for these workloads only, or raises (nothing is stored).

        Locks are taken in sorted id order, as :meth:`add_uploads` writes, so uploads that share workloads
        wait for each other instead of deadlocking. A workload that is not stored yet has no row to lock:
        a placeholder row (revision 0, no rows) is inserted in its place within this transaction, which
        reserves the id in that same order; no other transaction ever sees it.
        """
        try:
            with self._writing() as conn:
                now = _now()
                stored: dict[str, tuple[int, list[dict]]] = {}
                for workload_id in sorted(set(workload_ids)):
                    # A no-op write first: SQLite's write lock, or PostgreSQL's row lock, before the read.
                    done = conn.execute(workloads.update().where(workloads.c.id == workload_id)
                                        .values(revision=workloads.c.revision))
                    if done.rowcount != 1:
                        _insert_placeholder(conn, workload_id, device, now)
                    revision = conn.execute(
                        sa.select(workloads.c.revision).where(workloads.c.id == workload_id)).scalar_one()
                    data = conn.execute(sa.select(profile_rows.c.data)
                                        .where(profile_rows.c.workload_id == workload_id)
                                        .order_by(profile_rows.c.id)).scalars()
                    stored[workload_id] = (int(revision),
                                           [d if isinstance(d, dict) else json.loads(d) for d in data])
                reserved = {k for k, (revision, _) in stored.items() if revision == 0}
                return self._write_uploads(conn, refit(stored), idem, replaced_keys, reserved)
        except IntegrityError:
            raise RevisionConflict(", ".join(workload_ids)) from None

    def _write_uploads(self, conn: sa.Connection, writes: Sequence[WorkloadWrite],
                       idem: IdempotencyKey | None, replaced_keys: Sequence[str],
                       reserved: Collection[str] = ()) -> list[WorkloadRecord]:
        """Write ``writes`` in this transaction; ``reserved``: ids holding a placeholder row (revision 0)."""
        now = _now()
        # Workloads are written (and so row-locked on PostgreSQL) in sorted id order: two uploads that
        # share workloads wait for each other instead of deadlocking.
        by_id = {w.workload_id: self._write_upload(conn, w, now, w.workload_id in reserved)
                 for w in sorted(writes, key=lambda w: w.workload_id)}
        records = [by_id[w.workload_id] for w in writes]
        if idem is not None:
            # Same transaction: an upload committed while its client saw a broken connection is found by
            # the retry. A concurrent twin with the same key fails here (primary key) and replays: a retry
            # that stores again always inserts a key that was missing, which the twin inserts too.
            if replaced_keys:
                conn.execute(idempotency.delete().where(idempotency.c.key.in_(list(replaced_keys))))
            answer = upload_result([(r, len(w.rows)) for r, w in zip(records, writes, strict=True)],
                                   writes[0].device if writes else None)
            # The first key holds the whole answer, each other key its workload's entry (so the table
            # grows with the workloads of an upload, not with their square).
            responses = [answer, *answer["workloads"][1:]]  # type: ignore[misc]
            conn.execute(idempotency.insert(), [
                {"key": key, "workload_id": w.workload_id, "request_sha256": idem.request_sha256,
                 "response": response, "created_at": now}
                for key, w, response in zip(idem.keys(len(writes)), writes, responses, strict=True)])
        return records

    def _write_upload(self, conn: sa.Connection, write: WorkloadWrite, now: str, reserved: bool
                      ) -> WorkloadRecord:
        workload_id, rows = write.workload_id, write.rows
        if rows:
            payload = json.dumps(list(rows), sort_keys=True, default=str).encode()
            if write.expected_revision == 0 and not reserved:
                # A new workload: its placeholder (revision 0, as add_uploads_locked inserts) before its
                # id's deleted revision is read. Holding the id's row (PostgreSQL: its key; SQLite: the
                # write lock), no other upload or delete of the id commits between that read and this
                # commit, so the revision follows the last one the id had. Read first, a delete and an
                # upload committed in between would make this upload reuse a revision.
                _insert_placeholder(conn, workload_id, write.device, now)
            revision = 1 + (write.expected_revision or _last_deleted_revision(conn, workload_id))
            done = conn.execute(
                workloads.update()
                .where(workloads.c.id == workload_id, workloads.c.revision == write.expected_revision)
                .values(revision=revision,
                        rows_stored=workloads.c.rows_stored + len(rows), updated_at=now))
            if done.rowcount != 1:
                raise RevisionConflict(workload_id)
            # Read after the write (the row is locked now): merge this device's fit into the others'.
            # A placeholder (revision 0: reserved, or inserted above) takes this upload's device as its first.
            old = conn.execute(sa.select(workloads.c.device, workloads.c.fit, workloads.c.rows_stored)
                               .where(workloads.c.id == workload_id)).one()
            old_fit = old.fit if isinstance(old.fit, dict) else json.loads(old.fit or "{}")
            primary = write.device if write.expected_revision == 0 else old.device
            fit = _merged_fit(old_fit, primary, int(old.rows_stored) - len(rows), write.device,
                              len(rows), write.fit)
            conn.execute(workloads.update().where(workloads.c.id == workload_id)
                         .values(fit=fit, device=primary))
            upload_id = conn.execute(uploads.insert().values(
                workload_id=workload_id, revision=revision, rows=len(rows),
                sha256=hashlib.sha256(payload).hexdigest(), created_at=now)).inserted_primary_key[0]
            conn.execute(profile_rows.insert(), [
                {"workload_id": workload_id, "upload_id": upload_id, "data": dict(r)} for r in rows])
        else:
            # A part stored by an earlier try: lock the workload as a write would (its idempotency row is
            # rewritten); gone means it was deleted since, so the caller reads the upload's state again.
            done = conn.execute(workloads.update()
                                .where(workloads.c.id == workload_id, workloads.c.revision > 0)
                                .values(revision=workloads.c.revision))
            if done.rowcount != 1:
                raise RevisionConflict(workload_id)
        return self._record(conn.execute(sa.select(workloads).where(workloads.c.id == workload_id)).one())

    def delete_workload(self, workload_id: str) -> bool:
        """Delete a workload with its rows, uploads and idempotency keys; False if it was not stored.

        An upload that also stored rows in other workloads keeps its keys there: a retry of it stores
        again only this workload's part (see :class:`IdempotencyKey`). The id's last revision is kept in
        :data:`deleted_revisions`, so that the id uploaded again does not reuse it.
        """
        with self._writing() as conn:
            # The workload's row first, as uploads lock it before its rows and keys: no lock-order cycle.
            conn.execute(workloads.update().where(workloads.c.id == workload_id)
                         .values(revision=workloads.c.revision))
            revision = conn.execute(sa.select(workloads.c.revision).where(workloads.c.id == workload_id)).scalar()
            conn.execute(idempotency.delete().where(idempotency.c.workload_id == workload_id))
            conn.execute(profile_rows.delete().where(profile_rows.c.workload_id == workload_id))
            conn.execute(uploads.delete().where(uploads.c.workload_id == workload_id))
            done = conn.execute(workloads.delete().where(workloads.c.id == workload_id))
            if revision:
                conn.execute(deleted_revisions.delete().where(deleted_revisions.c.workload_id == workload_id))
                conn.execute(deleted_revisions.insert().values(workload_id=workload_id, revision=revision))
        return done.rowcount == 1
