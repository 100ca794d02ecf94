"""Helpers shared by the HTTP service tests: API key, and the published profile rows of ``tools.testing``
(which the benches import too)."""

from __future__ import annotations

import contextlib
import functools
import os
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator

from tools.testing import json_row, published_rows  # noqa: F401 (the tests import them from here)

API_KEY = "test-key-1"


def without_power(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in ("avg_power_w", "epoch_energy_j", "base_power_w")}
            for r in rows]


#: A PostgreSQL test database (e.g. set by .ci/run): the API tests run on SQLite and on it.
TEST_DATABASE_ENV = "JETPREDICT_TEST_DATABASE_URL"

#: Loopback tests send many requests from one address: rate limits off unless a test turns them on.
NO_RATE_LIMITS = {"RATE_LIMIT": "off", "RATE_LIMIT_ALL_MODES": "off"}


@functools.cache
def process_database_url() -> str:
    """This test process's own database on the server of ``TEST_DATABASE_ENV`` (pytest-xdist runs several,
    and each test empties its database first: ``tools.testing.database_of_process``); "" when unset."""
    from tools.testing import database_of_process

    url = os.environ.get(TEST_DATABASE_ENV, "")
    return database_of_process(url, os.environ.get("PYTEST_XDIST_WORKER")) if url else ""


#: A gate's wait in the heavy-work tests (s): only a full queue's immediate refusal can answer 503 while the
#: gate is held; a gate that queued without bound would wait this long (pytest's timeout fails it first).
HOLD_S = 3600


@contextlib.contextmanager
def gate_held(app) -> Iterator[None]:
    """The app's heavy-work gate taken by another thread for the block."""
    gate = app.extensions["jetpredict"].heavy
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with gate.admit("test"):
            holding.set()
            release.wait(30)

    worker = threading.Thread(target=hold)
    worker.start()
    try:
        assert holding.wait(30)
        yield
    finally:
        release.set()
        worker.join(30)


# -- SQLite files of the store tests ---------------------------------------------------------------------
def sqlite_app(data_dir, **config):
    """The service on a SQLite database under ``data_dir``, rate limits off."""
    from jetpredict.api.app import create_app

    return create_app({"DATA_DIR": str(data_dir), "API_KEYS": API_KEY, "TESTING": True, "DATABASE_URL": "",
                       **NO_RATE_LIMITS, **config})


def stored_sqlite(data_dir, rows: list[dict] | None = None) -> str:
    """A SQLite database under ``data_dir`` holding ``rows`` (default ``my-resnet``'s), closed and checkpointed;
    its path."""
    app = sqlite_app(data_dir)
    answer = app.test_client().post("/v1/profiles", json={"rows": published_rows() if rows is None else rows},
                                    headers={"X-API-Key": API_KEY})
    assert answer.status_code == 201, answer.json
    app.extensions["jetpredict"].storage.dispose()
    db = str(data_dir / "jetpredict.sqlite")
    con = sqlite3.connect(db)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    return db


def damage_sqlite(db: str, how: str) -> None:
    """Damage the SQLite file ``db``: ``garbage`` (no database at all), ``truncated`` (half of it), else the
    page of the stored rows overwritten, the header and the schema intact."""
    con = sqlite3.connect(db)
    page_size = con.execute("PRAGMA page_size").fetchone()[0]
    rows_page = con.execute("SELECT rootpage FROM sqlite_master WHERE name = 'profile_rows'").fetchone()[0]
    con.close()
    with open(db, "rb") as f:
        data = bytearray(f.read())
    if how == "garbage":
        data = bytearray(b"this is not a database" * 1000)
    elif how == "truncated":
        data = data[:len(data) // 2]
    else:  # the page of the stored rows overwritten, the header and the schema intact
        start = (rows_page - 1) * page_size
        data[start:start + page_size] = b"\xab" * page_size
    with open(db, "wb") as f:
        f.write(bytes(data))


def sqlite_format(db: str) -> str | None:
    """The format version stamped in the SQLite file ``db`` (None when unstamped)."""
    con = sqlite3.connect(db)
    try:
        row = con.execute("SELECT value FROM jetpredict_meta WHERE key = 'format'").fetchone()
    finally:
        con.close()
    return None if row is None else row[0]


def older_sqlite(db: str) -> None:
    """The database as a version before the format was stored left it."""
    con = sqlite3.connect(db)
    con.execute("DROP TABLE jetpredict_meta")
    con.commit()
    con.close()


def import_wsgi(*prefix: str, **env: str) -> subprocess.CompletedProcess:
    """What importing ``jetpredict.api.wsgi`` (gunicorn's first step with ``jetpredict.api.wsgi:app``) says, in
    a process started through ``prefix`` (e.g. setpriv) with ``env`` added to this one's environment."""
    return subprocess.run([*prefix, sys.executable, "-c", "import jetpredict.api.wsgi"], capture_output=True,
                          text=True, timeout=120, env={**os.environ, **env})
