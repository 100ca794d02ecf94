"""What a database failure means: a write refused (disk full, read-only, no privilege), a damaged store, a
store of a newer format, or one that cannot be reached now. :mod:`api.storage` raises and classifies these;
:mod:`api.errors`, the routes and the workload service turn them into answers."""

from __future__ import annotations

import sqlalchemy as sa
from jetpredict.api import sqlite_setup

#: What the drivers say when a write fails for want of space or of write access (SQLite, PostgreSQL, OS).
_WRITE_FAILURES = (("database or disk is full", "disk full"), ("no space left on device", "disk full"),
                   ("could not extend file", "disk full"), ("disk full", "disk full"),
                   ("readonly database", "read-only"), ("read-only transaction", "read-only"),
                   ("read-only file system", "read-only"))


def write_failure(exc: BaseException) -> str | None:
    """``"disk full"`` or ``"read-only"`` when ``exc`` is a write the store refused for that reason."""
    text = str(exc).lower()
    if isinstance(exc, OSError) or type(exc).__module__.startswith(("sqlalchemy", "sqlite3", "psycopg")):
        for words, reason in _WRITE_FAILURES:
            if words in text:
                return reason
    return None


def write_refused(exc: sa.exc.DBAPIError) -> bool:
    """Whether the database refused a write by permission: read-only (:func:`write_failure`), PostgreSQL's
    42501 (insufficient privilege) or 25006 (a read-only transaction: a hot standby)."""
    return getattr(exc.orig, "sqlstate", None) in ("42501", "25006") or write_failure(exc) == "read-only"


class StoreRefused(Exception):
    """The database is of a newer format (:data:`api.store_tables.FORMAT_VERSION`): this version neither
    reads nor writes it."""


def store_damage(exc: BaseException) -> str | None:
    """What is damaged when ``exc`` says the database is (a SQLite file that is not one, a bad page; XX00*)."""
    sqlstate = getattr(getattr(exc, "orig", None), "sqlstate", None)
    corrupted = {"XX001": "data corrupted", "XX002": "index corrupted"}.get(sqlstate or "")
    return (sqlite_setup.damage(exc) or corrupted) if isinstance(exc, sa.exc.DatabaseError) else None


def is_unreachable(exc: BaseException) -> bool:
    """True for errors that mean "the database cannot be used now" (down, refused, locked, pool empty,
    damaged, of a newer format)."""
    if isinstance(exc, sa.exc.TimeoutError | sa.exc.DisconnectionError | StoreRefused) or store_damage(exc):
        return True
    if isinstance(exc, sa.exc.DBAPIError):
        return bool(exc.connection_invalidated) or isinstance(exc, sa.exc.OperationalError | sa.exc.InterfaceError)
    return False
