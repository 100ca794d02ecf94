"""How :mod:`api.storage` sets up SQLite connections: pragmas (durability, WAL, foreign keys), real
transactions (write ones holding the write lock from their start) and a Unicode ``lower``."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Engine


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
