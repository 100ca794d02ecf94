"""How :mod:`api.storage` sets up SQLite connections: pragmas (durability, WAL, foreign keys), real
transactions (write ones holding the write lock from their start) and a Unicode ``lower``; the lock file
of schema creation; how a damaged file shows."""

from __future__ import annotations

import contextlib
import errno
import os
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import sqlalchemy as sa
from sqlalchemy.engine import Engine

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: SQLite's own locking and the retry remain
    fcntl = None  # type: ignore[assignment]

#: What SQLite says of a file that is not a database or whose pages are damaged (all are DatabaseError).
DAMAGE_WORDS = ("database disk image is malformed", "file is not a database", "malformed database schema")


class FileMoved(OSError):
    """The SQLite file was deleted or replaced under the running service: the pool's connections still
    write to the file they opened, which a restart no longer finds, so every write is refused."""

    def __init__(self, location: str, strerror: str, advice: str) -> None:
        super().__init__(errno.ENOENT, strerror, location)
        self.message = f"{location}: {strerror}: {advice}"

    def __str__(self) -> str:
        return self.message


def file_identity(path: str) -> tuple[int, int]:
    """(device, inode) of the file at ``path``; OSError where it is gone."""
    stat = os.stat(path)
    return stat.st_dev, stat.st_ino


def moved_aside(location: str, exc: OSError) -> FileMoved:
    """:class:`FileMoved` for a file at ``location`` that ``os.stat`` no longer finds (``exc``)."""
    return FileMoved(location, f"{exc.strerror or exc} (moved aside or deleted)",
                     "put it back, or restart the service to start an empty one")


def check_same_file(path: str, identity: tuple[int, int]) -> None:
    """:class:`FileMoved` unless the file at ``path`` is still the one of ``identity`` (:func:`file_identity`)."""
    try:
        now = file_identity(path)
    except OSError as exc:
        raise moved_aside(path, exc) from None
    if now != identity:
        raise FileMoved(path, "replaced by another file since the service opened it",
                        "restart the service to serve the new file (or put the old one back)")


def read_only_url(path: str) -> str:
    """The URL reading the SQLite file at ``path`` on a read-only file system: SQLite opens a WAL file
    there without its ``-shm`` file only as immutable (no process can change it there). Immutable ignores a
    ``-wal`` file: where one is left, open the file as usual (SQLite reads it with the ``-shm``)."""
    return f"sqlite:///file:{urllib.parse.quote(str(Path(path).resolve()))}?immutable=1&uri=true"


def configure(engine: Engine) -> None:
    """Set up every connection of a SQLite ``engine`` and every transaction begun on one."""
    sa.event.listen(engine, "connect", connected)
    sa.event.listen(engine, "begin", begin)


def connected(dbapi_connection, _record) -> None:
    """Set up a new SQLite connection (the engine's ``connect`` event)."""
    # pysqlite's own transaction handling off: it would BEGIN only before the first INSERT/UPDATE/DELETE,
    # so a transaction's reads ran outside it (not one snapshot, not under the write lock);
    # :func:`begin` begins every transaction instead (SQLAlchemy's documented pysqlite recipe).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA busy_timeout=30000")  # first, so the pragmas below wait for other workers
    cursor.execute("PRAGMA journal_mode=WAL")
    # FULL: an answered commit is on disk before the 201 goes out (SIGKILL or power loss).
    cursor.execute("PRAGMA synchronous=FULL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()
    # SQLite's lower() folds ASCII only, so a case-insensitive search (icontains: lower() LIKE lower())
    # missed "ÜberNet" for "übernet": fold all of Unicode, as api.storage has PostgreSQL do too.
    dbapi_connection.create_function("lower", 1, unicode_lower, deterministic=True)


def unicode_lower(text: object) -> object:
    """SQL ``lower`` on SQLite: Python's Unicode lower case of text; anything else (NULL, numbers) as is."""
    return text.lower() if isinstance(text, str) else text


#: The execution option of a connection whose transactions write (``api.storage.Storage._writing``).
WRITE_OPTION = "jetpredict_writes"


def begin(conn: sa.Connection) -> None:
    """Begin a SQLite transaction: ``BEGIN IMMEDIATE`` for writes, so the write lock is taken (waiting up to
    ``busy_timeout``) before anything is read in it; a plain ``BEGIN`` (one snapshot) for reads."""
    conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get(WRITE_OPTION) else "BEGIN")


def damage(exc: BaseException) -> str | None:
    """SQLite's words when ``exc`` says the database file is damaged (not a database, a malformed page)."""
    text = str(getattr(exc, "orig", None) or exc).lower()
    return next((words for words in DAMAGE_WORDS if words in text), None)


def quick_check(conn: sa.Connection) -> str | None:
    """The first problem ``PRAGMA quick_check`` finds in the file (it reads every page), None when sound."""
    first = conn.exec_driver_sql("PRAGMA quick_check(1)").scalar()
    return None if first == "ok" else "; ".join(str(first).splitlines())


def open_lock_file(path: str) -> IO[bytes]:
    return open(path, "a+b")


@contextlib.contextmanager
def schema_lock(database: str) -> Iterator[OSError | None]:
    """An exclusive lock on ``<database>.schema-lock`` while the schema is created. Where that file cannot
    be made (a read-only file system or folder) it yields the error, unlocked: no process can create the
    schema there, so one that exists can still be served."""
    if fcntl is None:
        yield None
        return
    try:
        f = open_lock_file(f"{database}.schema-lock")
    except OSError as exc:
        if exc.errno not in (errno.EROFS, errno.EACCES, errno.EPERM):
            raise
        yield exc
        return
    with f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield None
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
