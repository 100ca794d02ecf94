"""Database URLs as the service takes them: the installed PostgreSQL driver filled in, checked before any
engine is made (a clear error naming the setting, not a traceback from deep in SQLAlchemy), printed with
their secrets hidden, and what a driver said when the server refused one (:func:`driver_reason`)."""

from __future__ import annotations

import importlib.util
import re
from urllib.parse import quote

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
    rule = "give sqlite:///PATH or postgresql://USER@HOST:PORT/DATABASE (PORT a number)"
    what = f"the database URL {masked_url(url)!r} (--database-url, {ENV_PREFIX}DATABASE_URL)"
    try:
        dialect = sa.engine.make_url(url).get_dialect()
    except (sa.exc.ArgumentError, ValueError):  # NoSuchModuleError (an unknown kind); ValueError: a bad port
        raise InputError(f"{what} is not one jetpredict can use: {rule}", "database_url") from None
    try:
        dialect.import_dbapi()
    except ImportError as exc:
        extra = " (pip install 'jetpredict[postgres]')" if url.startswith("postgresql") else ""
        raise InputError(f"{what} needs a driver that is not installed: {exc}{extra}", "database_url") from None
    problem = _connection_option_problem(url, dialect)
    if problem:
        raise InputError(f"{what} has {problem}: fix its spelling or remove it (libpq's options: sslmode, "
                         "connect_timeout, application_name, ...)", "database_url")
    return url


def _connection_option_problem(url: str, dialect: type) -> str | None:
    """What libpq says of an option it does not know in ``url``'s query (``?sslmod=require``), None when every
    one is known or the driver is not psycopg 3: psycopg builds the connection string the same way at connect,
    where it failed as a ProgrammingError traceback."""
    if dialect.driver != "psycopg":
        return None
    import psycopg.conninfo

    parsed = sa.engine.make_url(url)
    _, kwargs = dialect().create_connect_args(parsed)
    try:
        psycopg.conninfo.make_conninfo("", **kwargs)
    except psycopg.ProgrammingError as exc:
        return driver_reason(exc, url)
    return None


def _parsed(url: str) -> sa.engine.URL | None:
    """``url`` parsed, None when it cannot be (ArgumentError: not a URL; ValueError: a port not a number)."""
    try:
        return sa.engine.make_url(url)
    except (sa.exc.ArgumentError, ValueError):
        return None


def _driver_error(exc: BaseException) -> BaseException:
    """The driver's own exception inside SQLAlchemy's wrapper (``exc`` when it wraps none)."""
    return getattr(exc, "orig", None) or exc


def masked_url(url: str) -> str:
    """``url`` safe to print: the password is hidden, in the user part and in query parameters."""
    parsed = _parsed(url)
    if parsed is None:
        return "<unparseable database URL>"
    query = {k: ("***" if _is_secret(k) else v) for k, v in parsed.query.items()}
    return parsed.set(query=query).render_as_string(hide_password=True)


def _is_secret(query_key: str) -> bool:
    return any(word in query_key.lower() for word in ("pass", "secret", "token"))


#: Longest driver message shown (characters): libpq's are a line or two.
MAX_REASON_CHARS = 300

#: What libpq says when the server refuses the URL itself (a wrong password or user, no such database or
#: role, no pg_hba.conf line for it, a role without LOGIN or CONNECT, SSL required of a server without it, an
#: option's value it does not know): waiting will not help. A translated server message reads as an outage.
_REFUSED_AS_GIVEN = re.compile(r'authentication failed|(database|role) ".*" does not exist|no pg_hba\.conf entry'
                               r'|permission denied for database|is not permitted to log in'
                               r'|server does not support SSL|invalid \w+ value')


def driver_reason(exc: BaseException, url: str) -> str:
    """What the database driver said of ``exc`` (SQLAlchemy's wrapper and hint left out), on one line and at
    most :data:`MAX_REASON_CHARS` long, every secret of ``url`` replaced by ``***``. libpq never repeats a
    password; this holds for any driver that would. A secret that is also the URL's user, host or database
    (``postgres:postgres@postgres/postgres``) is left: masked, the message would lose every name it gives."""
    orig = _driver_error(exc)
    text = " ".join(str(orig).split()) or type(orig).__name__
    parsed = _parsed(url)
    secrets = [] if parsed is None else [parsed.password, *(v for k, v in parsed.query.items() if _is_secret(k))]
    names = set() if parsed is None else {parsed.username, parsed.host, parsed.database}
    for secret in secrets:
        for form in {str(s) for s in (secret if isinstance(secret, tuple) else (secret,)) if s} - names:
            text = text.replace(form, "***").replace(quote(form, safe=""), "***")
    return text if len(text) <= MAX_REASON_CHARS else text[:MAX_REASON_CHARS - 3] + "..."


def refused_as_given(exc: BaseException) -> bool:
    """Whether the server refused the connection for what the URL says (user, password, database), not
    for an outage: a configuration error."""
    return bool(_REFUSED_AS_GIVEN.search(str(_driver_error(exc))))


def cannot_create_tables(exc: BaseException, url: str, location: str) -> InputError:
    """The error of a PostgreSQL role refused CREATE (42501) in the schema that would hold the tables: the
    grant that would let it, or a role that owns the database (PostgreSQL 15 gives non-owners no CREATE in
    schema public). ``location``: the database as printed (password hidden)."""
    reason = re.sub(r" LINE \d+:.*", "", driver_reason(exc, url))  # the statement quoted: no help here
    found = re.search(r'permission denied for schema "?([^"\s]+)', reason)
    schema = found.group(1) if found else "public"
    parsed = _parsed(url)
    user = (parsed.username if parsed is not None else None) or "the role"
    return InputError(f"the database user {user} cannot create jetpredict's tables in {location} ({reason}): "
                      f"as the database's owner run GRANT CREATE ON SCHEMA {schema} TO {user}, or give "
                      f"--database-url ({ENV_PREFIX}DATABASE_URL) a user that owns the database", "database_url")
