"""Storage of uploaded profile rows and fitted-workload summaries (SQLAlchemy 2 Core).

A SQLite file by default (WAL journal, ``synchronous=FULL``: an answered upload survives a SIGKILL), any
PostgreSQL by URL. Each upload is one transaction: the rows of every workload it holds, their upload records
and the workloads' new revisions commit together or not at all; concurrent uploads to one workload are
serialised by an optimistic revision check (a conditional ``UPDATE``), the same on both. Fitted models are
never stored (no pickles): ``api.workloads`` rebuilds them from the rows.

A workload may hold rows of several device types. ``workloads.device`` is the device of its first rows (the
default of requests that name none); ``workloads.fit`` holds that device's fit summary at its top and every
device's under ``devices`` (``{device: {rows, model_version, ...}}``); a record without ``devices`` (older)
reads as one device (:func:`device_fits`), so existing databases need no migration.
"""
from __future__ import annotations

import contextlib
import errno
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
from jetpredict.api.database_url import cannot_create_tables, checked_url, masked_url
from jetpredict.api.store_failures import StoreRefused, write_refused
from jetpredict.api.store_tables import (  # the tables, here too for the modules that read them
    FORMAT_VERSION,
    deleted_revisions,
    idempotency,
    meta,
    metadata,
    profile_rows,
    uploads,
    workloads,
)
from jetpredict.predictor.limits import FIT_CAVEAT_FIELDS, PROVENANCE_FIELDS
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError


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


#: What a fit summary (``api.workloads.fit_summary``) stores per device: all its provenance, then its figures.
FIT_FIELDS: tuple[str, ...] = (*PROVENANCE_FIELDS, "has_power", *FIT_CAVEAT_FIELDS)


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


def fit_column(top: Mapping[str, object], devices: Mapping[str, tuple[object, Mapping[str, object]]]) -> dict:
    """The ``fit`` column's layout: the primary device's summary ``top`` (without its ``devices``), and per
    device ``(rows, fit)`` its row count and :func:`stored_fit_fields`."""
    return {**{k: v for k, v in top.items() if k != "devices"},
            "devices": {device: {"rows": rows, **stored_fit_fields(fit)} for device, (rows, fit) in devices.items()}}


def _merged_fit(old: Mapping[str, object], primary: str, rows_stored: int, device: str, rows: int,
                fit: Mapping[str, object]) -> dict:
    """The ``fit`` column after an upload of ``rows`` rows of ``device`` fitted to ``fit``: that device's
    entry replaced (its rows counted on), the top-level summary replaced when it is the primary device."""
    before = WorkloadRecord("", primary, 0, rows_stored, dict(old), "", "")
    per_device = {d: (had.get("rows"), had) for d, had in (device_fits(before) if old else {}).items()}
    done = per_device.get(device, (0, {}))[0] or 0
    per_device[device] = (int(done) + rows, fit)
    return fit_column(fit if device == primary or not old else old, per_device)


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
    """The JSON answer to an upload (``POST /v1/profiles`` 201), kept for idempotent replays. ``results``:
    (record, rows stored by this upload) per workload, in order; ``device``: the upload's. The top-level
    fields describe the first workload (as a single-workload upload always answered), ``workloads`` all."""
    each = [workload_result(record, n, device) for record, n in results]
    return {**each[0], "workloads": each}


@dataclass(frozen=True)
class IdempotencyKey:
    """The key an upload is made under and the SHA-256 of its request body.

    An upload of ``n`` workloads is recorded under ``n`` keys (:meth:`keys`: ``key``, ``key#1`` ...
    ``key#n-1``, in the upload's order; the first, the one single-workload uploads always used, holds the
    whole answer), each row tied to its workload. Deleting a workload deletes its row, so a retry finds the
    upload intact (every key present: the answer is replayed) or sees which parts were lost (their keys are
    missing: only those are stored again). Derived keys keep the table's columns as they were. ``required``:
    fields each workload's entry of the answer must hold a value in for the answer to be kept or replayed."""

    key: str
    request_sha256: str
    required: tuple[str, ...] = ()

    def keys(self, n: int) -> list[str]:
        """The keys of an upload of ``n`` workloads, in the upload's order."""
        return [self.key, *(f"{self.key}#{i}" for i in range(1, n))]

    def holds_required(self, answer: Mapping[str, object]) -> bool:
        """Whether ``answer`` and each of its ``workloads`` entries hold a value in every ``required`` field."""
        entries: Sequence[Mapping[str, object]] = answer.get("workloads") or ()  # type: ignore[assignment]
        return all(entry.get(k) is not None for entry in (answer, *entries) for k in self.required)


@dataclass(frozen=True)
class WorkloadWrite:
    """One workload's part of an upload: its rows and the fit of the workload with them. Empty ``rows``: stored
    by an earlier try (its idempotency key is present), only the record is read. ``expected_revision``: that
    the fit was made against (0 = a new workload: it follows its id's last deleted one, :data:`deleted_revisions`)."""

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


def _missing_tables(conn: sa.Connection) -> set[str]:
    """The data tables the database lacks (:data:`meta` aside: an older database is complete without it)."""
    return set(metadata.tables) - {meta.name} - set(sa.inspect(conn).get_table_names())


class Storage:
    """Profile rows and workload records in one SQL database."""

    def __init__(self, url: str) -> None:
        self.url = url = checked_url(url)
        self.is_sqlite = url.startswith("sqlite")
        self.is_postgresql = url.startswith("postgresql")
        database = sa.engine.make_url(url).database if self.is_sqlite else None
        # The database as an operator names it: the SQLite file's path, else the URL without password.
        self.location: str = database or masked_url(url)
        #: The SQLite database's path (taken as given, a ``file:`` URI too); None: in memory, or not SQLite.
        self.sqlite_file: str | None = database if database and database != ":memory:" else None
        if self.sqlite_file:
            Path(self.sqlite_file).parent.mkdir(parents=True, exist_ok=True)
        self.refused: StoreRefused | None = None  # set by create_schema: every connection is refused
        #: (device, inode) of the SQLite file when first connected: writes check it is still that file.
        self._file_identity: tuple[int, int] | None = None
        self.engine: Engine = self._engine(url)
        self._local = threading.local()
        self._icu_collation: str | None = None  # PostgreSQL: ICU_ROOT_COLLATION, "" if absent; None: not asked
        marker = {"qmark": "?", "format": "%s", "pyformat": "%s", "numeric": ":1", "named": ":id",
                  "numeric_dollar": "$1"}[self.engine.dialect.paramstyle]
        self._revision_sql = f"SELECT revision FROM workloads WHERE id = {marker}"

    def _engine(self, url: str) -> Engine:
        """An engine for ``url``, set up for its database, whose connections fail once :attr:`refused` is set."""
        if self.is_sqlite:
            engine = sa.create_engine(url, connect_args={"timeout": 30})
            sqlite_setup.configure(engine)
            sa.event.listen(engine, "connect", self._note_file)
        else:
            # connect_timeout: a database that is down answers 503 within seconds, not after the TCP timeout.
            args = {"connect_timeout": 5} if self.is_postgresql else {}
            engine = sa.create_engine(url, pool_pre_ping=True, connect_args=args)
        sa.event.listen(engine, "do_connect", self._refuse)
        return engine

    def _refuse(self, *_args: object) -> None:
        if self.refused is not None:
            raise self.refused

    def _plain_file(self) -> str | None:
        """The SQLite file's path on disk; None in memory, for a ``file:`` URI, or not SQLite."""
        path = self.sqlite_file
        return None if path is None or path.startswith("file:") else path

    def _note_file(self, *_args: object) -> None:
        """Remember which file the first connection opened (the file exists once SQLite connected)."""
        path = self._plain_file()
        if path and self._file_identity is None:
            with contextlib.suppress(OSError):
                self._file_identity = sqlite_setup.file_identity(path)

    def check_file(self) -> None:
        """:class:`api.sqlite_setup.FileMoved` where the SQLite file was deleted or replaced since the service
        opened it: the pool's connections would write to the old file, lost at the next start."""
        path = self._plain_file()
        if path and self._file_identity is not None:
            sqlite_setup.check_same_file(path, self._file_identity)

    def create_schema(self) -> None:
        """Create missing tables and record :data:`FORMAT_VERSION` (idempotent, safe when several processes
        boot at once); :class:`StoreRefused` for a database of a newer format, nothing written. An older
        database is stamped where the store lets it (:meth:`_stamp`). PostgreSQL: a transaction-scoped
        advisory lock around it (concurrent ``CREATE TABLE`` of one name collide in the catalogue even with
        ``IF NOT EXISTS``). SQLite: a lock file beside the database (none on a read-only file system: an
        existing schema is served, writes get 503), ``create_all`` retried."""
        if self.is_postgresql:
            with self.engine.begin() as conn:
                conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": SCHEMA_LOCK_KEY})
                stamped = self._check_format(conn)  # read-only first: a role without CREATE gets this far
                if _missing_tables(conn):
                    try:
                        metadata.create_all(conn)
                    except sa.exc.DBAPIError as exc:
                        if getattr(exc.orig, "sqlstate", None) != "42501":
                            raise
                        raise cannot_create_tables(exc, self.url, self.location) from None
                if not stamped:
                    self._stamp(conn)
            return
        path = self.sqlite_file
        with sqlite_setup.schema_lock(path) if path else contextlib.nullcontext() as no_lock:
            if no_lock is not None and not Path(path).is_file():
                raise no_lock  # nothing to serve, and no file can be made there
            if no_lock is not None and no_lock.errno == errno.EROFS and not Path(f"{path}-wal").exists():
                self.engine.dispose()
                self.engine = self._engine(sqlite_setup.read_only_url(path))
            with self.engine.connect() as conn:
                stamped = self._check_format(conn)  # before anything is written
                missing = _missing_tables(conn)
            if no_lock is not None:
                if missing:
                    raise no_lock
                return
            for attempt in range(_SCHEMA_TRIES if missing else 0):
                try:
                    metadata.create_all(self.engine)
                    break
                except sa.exc.OperationalError:
                    # Another process (without our lock file: an older version) created them meanwhile.
                    if attempt == _SCHEMA_TRIES - 1:
                        raise
                    time.sleep(0.05 * (attempt + 1))
            if not stamped:  # a file that refuses even the write lock is served unstamped too
                with contextlib.suppress(sa.exc.OperationalError), self._writing() as conn:
                    self._stamp(conn)

    def _stamp(self, conn: sa.Connection) -> None:
        """Record :data:`FORMAT_VERSION` in a database without it, under a savepoint: where the store refuses
        the write (a read-only file, a role without CREATE, a hot standby) it is served unstamped."""
        try:
            with conn.begin_nested():
                meta.create(conn, checkfirst=True)
                self._check_format(conn, stamp=True)
        except sa.exc.DBAPIError as exc:
            if not write_refused(exc):
                raise

    def _check_format(self, conn: sa.Connection, stamp: bool = False) -> bool:
        """Whether the database records its format; :class:`StoreRefused` (and so every connection from now
        on) if it is newer. ``stamp``: record :data:`FORMAT_VERSION` where none is (new, or older)."""
        found = (conn.execute(sa.select(meta.c.value).where(meta.c.key == "format")).scalar()
                 if sa.inspect(conn).has_table(meta.name) else None)
        if found is None and stamp:
            conn.execute(meta.insert().values(key="format", value=str(FORMAT_VERSION)))
        if found is None or (str(found).isdigit() and int(found) <= FORMAT_VERSION):
            return stamp or found is not None
        self.refused = StoreRefused(
            f"database {self.location} is of format {found}, newer than format {FORMAT_VERSION} that this "
            "jetpredict reads and writes: upgrade jetpredict, or point it at another database")
        self.dispose()
        raise self.refused

    @contextlib.contextmanager
    def _writing(self) -> Iterator[sa.Connection]:
        """A write transaction (committed when the block ends without an exception); on SQLite it holds
        the database's write lock from its start (:func:`api.sqlite_setup.begin`); refused where the SQLite
        file is no longer the one opened (:meth:`check_file`)."""
        self.check_file()
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

    @staticmethod
    def _record(row: sa.Row) -> WorkloadRecord:
        fit = row.fit if isinstance(row.fit, dict) else json.loads(row.fit or "{}")
        return WorkloadRecord(row.id, row.device, row.revision, row.rows_stored, fit, row.created_at, row.updated_at)

    def revision(self, workload_id: str) -> int | None:
        """The workload's revision (checked before every use of a cached model), None if not stored. On every
        prediction, so one raw DB-API connection per thread (~20 us on SQLite, ~0.5 ms through a pooled
        SQLAlchemy connection); any driver error falls back to the pool."""
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

    def list_workloads(self, limit: int, offset: int, search: str | None = None) -> tuple[int, list[WorkloadRecord]]:
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
        """SQL that lower-cases text over all of Unicode. SQLite: its ``lower``, replaced by
        :mod:`api.sqlite_setup`. PostgreSQL's follows the database's LC_CTYPE, which folds ASCII only under
        the C locale (``initdb --locale=C``): there, ICU's root collation, where the server has it."""
        if not self.is_postgresql:
            return sa.func.lower
        if self._icu_collation is None:
            found = conn.execute(sa.text("SELECT 1 FROM pg_collation WHERE collname = :name"),
                                 {"name": ICU_ROOT_COLLATION}).first()
            self._icu_collation = ICU_ROOT_COLLATION if found else ""
        collation = self._icu_collation
        return (lambda expr: sa.func.lower(expr.collate(collation))) if collation else sa.func.lower

    @contextlib.contextmanager
    def _snapshot(self) -> Iterator[sa.Connection]:
        """A read transaction seeing one state (PostgreSQL's READ COMMITTED would see each statement's)."""
        with self.engine.connect() as conn:
            if self.is_postgresql:
                conn.execution_options(isolation_level="REPEATABLE READ")
            with conn.begin():
                yield conn

    @staticmethod
    def _rows(conn: sa.Connection, workload_id: str) -> list[dict]:
        data = conn.execute(sa.select(profile_rows.c.data).where(profile_rows.c.workload_id == workload_id)
                            .order_by(profile_rows.c.id)).scalars()
        return [d if isinstance(d, dict) else json.loads(d) for d in data]

    def get_workload_rows(self, workload_id: str) -> tuple[WorkloadRecord | None, list[dict]]:
        """(:meth:`get_workload`'s record, its rows in upload order) read in one snapshot; (None, []) for None."""
        with self._snapshot() as conn:
            row = conn.execute(sa.select(workloads).where(workloads.c.id == workload_id)).first()
            rows = [] if row is None else self._rows(conn, workload_id)
        return (self._record(row), rows) if rows else (None, [])

    def get_workload(self, workload_id: str) -> WorkloadRecord | None:
        """The workload's record alone; None if not stored or if it holds no rows (one a delete left)."""
        with self.engine.connect() as conn:  # one statement: one state, no snapshot needed
            row = conn.execute(sa.select(workloads).where(workloads.c.id == workload_id, sa.exists().where(
                profile_rows.c.workload_id == workload_id))).first()
        return None if row is None else self._record(row)

    def load_rows(self, workload_id: str) -> tuple[int | None, list[dict]]:
        """(revision, rows) as :meth:`get_workload_rows`."""
        record, rows = self.get_workload_rows(workload_id)
        return (None if record is None else record.revision), rows

    def refresh_fit(self, workload_id: str, revision: int, fit: Mapping[str, object]) -> bool:
        """Store ``fit`` as the workload's fit summary unless it changed since ``revision``; done?"""
        with self._writing() as conn:
            return conn.execute(workloads.update().values(fit=dict(fit)).where(
                workloads.c.id == workload_id, workloads.c.revision == revision)).rowcount == 1

    def find_idempotent(self, keys: Sequence[str]) -> dict[str, tuple[str, dict]]:
        """``{key: (request_sha256, response)}`` of those of ``keys`` an upload was made under."""
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(idempotency.c.key, idempotency.c.request_sha256, idempotency.c.response)
                                .where(idempotency.c.key.in_(list(keys)))).all()
        return {row.key: (row.request_sha256, row.response if isinstance(row.response, dict)
                          else json.loads(row.response)) for row in rows}

    def add_uploads(self, writes: Sequence[WorkloadWrite], idem: IdempotencyKey | None = None,
                    replaced_keys: Sequence[str] = ()) -> list[WorkloadRecord]:
        """Store every workload's part of one upload and bump their revisions, all in one transaction.
        :class:`RevisionConflict` if another upload changed any of the workloads since its rows were read
        (or a twin of this upload committed first): nothing is stored. ``replaced_keys``: idempotency rows
        of an earlier try of this upload, rewritten with the new answer."""
        try:
            with self._writing() as conn:
                return self._write_uploads(conn, writes, idem, replaced_keys)
        except IntegrityError:
            raise RevisionConflict(", ".join(w.workload_id for w in writes)) from None

    def add_uploads_locked(self, workload_ids: Sequence[str], device: str,
                           refit: Callable[[dict[str, tuple[int, list[dict]]]], Sequence[WorkloadWrite]],
                           idem: IdempotencyKey | None = None,
                           replaced_keys: Sequence[str] = ()) -> list[WorkloadRecord]:
        """Like :meth:`add_uploads`, holding the write locks of ``workload_ids`` while ``refit`` runs: for
        workloads many clients upload to at once, where optimistic retries keep losing, the writers queue.
        ``refit({id: (revision, stored rows)})`` (revision 0: not stored) returns the writes, for these
        workloads only, or raises (nothing is stored). Locks are taken in sorted id order, as
        :meth:`add_uploads` writes (no deadlock between uploads that share workloads); a workload not stored
        yet is locked by a placeholder row (revision 0, no rows) inserted here, which no other transaction sees.
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
                    stored[workload_id] = (int(revision), self._rows(conn, workload_id))
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
            # A null the schema forbids (a stale fit not refreshed) is never kept: a retry is answered afresh.
            if idem.holds_required(answer):
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
                # A new workload: its placeholder (revision 0) before its id's deleted revision is read.
                # Holding the id's row (PostgreSQL: its key; SQLite: the write lock), no delete or upload of
                # the id commits in between, which would make this upload reuse a revision.
                _insert_placeholder(conn, workload_id, write.device, now)
            revision = 1 + (write.expected_revision or _last_deleted_revision(conn, workload_id))
            done = conn.execute(
                workloads.update()
                .where(workloads.c.id == workload_id, workloads.c.revision == write.expected_revision)
                .values(revision=revision, rows_stored=workloads.c.rows_stored + len(rows), updated_at=now))
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
        An upload that also stored rows in other workloads keeps its keys there: a retry of it stores again
        only this workload's part (:class:`IdempotencyKey`). The id's last revision is kept in
        :data:`deleted_revisions`, so that the id uploaded again does not reuse it."""
        with self._writing() as conn:
            # The row locked and its revision read in one statement, as uploads lock it before their rows. None:
            # nothing stored; an upload still uncommitted (PostgreSQL) comes after, its rows are not ours.
            # FOR UPDATE, not UPDATE ... RETURNING: SQLite before 3.35 (JetPack 5's) has no RETURNING, and its
            # write lock keeps a delete and an upload apart anyway.
            revision = conn.execute(sa.select(workloads.c.revision).where(workloads.c.id == workload_id)
                                    .with_for_update()).scalar()
            if revision is None:
                return False
            conn.execute(idempotency.delete().where(idempotency.c.workload_id == workload_id))
            conn.execute(profile_rows.delete().where(profile_rows.c.workload_id == workload_id))
            conn.execute(uploads.delete().where(uploads.c.workload_id == workload_id))
            conn.execute(workloads.delete().where(workloads.c.id == workload_id))
            if revision:
                conn.execute(deleted_revisions.delete().where(deleted_revisions.c.workload_id == workload_id))
                conn.execute(deleted_revisions.insert().values(workload_id=workload_id, revision=revision))
        return True
