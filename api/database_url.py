"""Database URLs as the service takes them: the installed PostgreSQL driver filled in, checked before any
engine is made (a clear error naming the setting, not a traceback from deep in SQLAlchemy), and printed
with their secrets hidden."""

from __future__ import annotations

import importlib.util

import sqlalchemy as sa
from jetpredict.api.config import ENV_PREFIX
from jetpredict.models.errors import InputError


def normalize_url(url: str) -> str:
    """``postgresql://`` / ``postgres://`` with the driver that is installed: psycopg 3 (the ``[postgres]``
    extra), else psycopg2 where only that is installed."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in ("postgresql", "postgres"):
        return url
    driver = "psycopg2" if not importlib.util.find_spec("psycopg") and importlib.util.find_spec("psycopg2") \
        else "psycopg"
    return f"postgresql+{driver}://{rest}"


def checked_url(url: str) -> str:
    """``url`` normalized (:func:`normalize_url`), or InputError naming ``database_url`` when it is not a
    database URL or its driver is not installed (a traceback from deep in SQLAlchemy before)."""
    url = normalize_url(url)
    rule = "give sqlite:///PATH or postgresql://USER@HOST:PORT/DATABASE"
    what = f"the database URL {masked_url(url)!r} (--database-url, {ENV_PREFIX}DATABASE_URL)"
    try:
        dialect = sa.engine.make_url(url).get_dialect()
    except sa.exc.ArgumentError:  # NoSuchModuleError (an unknown database kind) too
        raise InputError(f"{what} is not one jetpredict can use: {rule}", "database_url") from None
    try:
        dialect.import_dbapi()
    except ImportError as exc:
        extra = " (pip install 'jetpredict[postgres]')" if url.startswith("postgresql") else ""
        raise InputError(f"{what} needs a driver that is not installed: {exc}{extra}", "database_url") from None
    return url


def masked_url(url: str) -> str:
    """``url`` safe to print: the password is hidden, in the user part and in query parameters."""
    try:
        parsed = sa.engine.make_url(url)
    except sa.exc.ArgumentError:
        return "<unparseable database URL>"
    query = {k: ("***" if "pass" in k.lower() or "secret" in k.lower() or "token" in k.lower() else v)
             for k, v in parsed.query.items()}
    return parsed.set(query=query).render_as_string(hide_password=True)
