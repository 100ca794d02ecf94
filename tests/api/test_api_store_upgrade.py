"""An older database (no ``jetpredict_meta``) opened where the store refuses writes, and /healthz's checks
of the SQLite file: moved aside, and ``quick_check`` at most once per interval. None is ever a 500."""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Callable

import pytest
import sqlalchemy as sa
from api_fixtures import (
    API_KEY,
    damage_sqlite,
    older_sqlite,
    published_rows,
    sqlite_app,
    sqlite_format,
    stored_sqlite,
)
from jetpredict.api import sqlite_setup
from jetpredict.api import storage as storage_module
from jetpredict.api import workloads as workloads_module
from jetpredict.api.routes import health
from jetpredict.api.storage import FORMAT_VERSION, Storage
from jetpredict.predictor.model import MODEL_VERSION
from test_api_store_faults import _age_stored_fit

from tools.testing import OLD_MODEL_VERSION, age_stored_fits

AUTH = {"X-API-Key": API_KEY}


def _has_meta(db: str) -> bool:
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT 1 FROM sqlite_master WHERE name = 'jetpredict_meta'").fetchone() is not None
    finally:
        con.close()


# -- an older SQLite file the store may not write -------------------------------------------------------
def _refuse_writes(db: str, monkeypatch) -> Callable[..., None]:
    """Make ``db`` read-only for the apps made from here on; returns the connection setup to restore."""
    os.chmod(db, 0o444)  # as an operator would; root ignores it, so SQLite refuses writes by query_only
    connected = sqlite_setup.connected

    def read_only(dbapi_connection, record) -> None:
        connected(dbapi_connection, record)
        dbapi_connection.execute("PRAGMA query_only = ON")  # "attempt to write a readonly database"

    monkeypatch.setattr(sqlite_setup, "connected", read_only)
    return connected


def test_an_older_read_only_sqlite_file_is_served_unstamped_at_once(tmp_path, monkeypatch, caplog):
    db = stored_sqlite(tmp_path)
    older_sqlite(db)
    connected = _refuse_writes(db, monkeypatch)
    sleeps, creations = [], []
    monkeypatch.setattr(storage_module.time, "sleep", sleeps.append)
    create_schema = Storage.create_schema
    monkeypatch.setattr(Storage, "create_schema", lambda self: creations.append(1) or create_schema(self))
    caplog.set_level(logging.WARNING, "jetpredict.api")
    app = sqlite_app(tmp_path)
    assert app.extensions["jetpredict"].schema_ready
    client = app.test_client()
    for _ in range(3):
        r = client.get("/v1/workloads/my-resnet")
        assert r.status_code == 200, r.json
    assert client.post("/v1/profiles", json={"rows": published_rows(as_id="x")}, headers=AUTH).status_code == 503
    assert creations == [1] and sleeps == []
    assert not any("unreachable" in m for m in caplog.messages), caplog.messages
    assert not _has_meta(db)  # unstamped: a start that can write stamps it
    app.extensions["jetpredict"].storage.dispose()
    monkeypatch.setattr(sqlite_setup, "connected", connected)
    os.chmod(db, 0o644)
    Storage(f"sqlite:///{db}").create_schema()
    assert sqlite_format(db) == str(FORMAT_VERSION)


def test_a_stale_fit_in_a_read_only_sqlite_file_is_refitted_for_reads_and_left_stored(tmp_path, monkeypatch):
    """After an upgrade a fit of an older model version is refitted for the listing and the workload's page; where
    the store refuses to keep the refreshed fit they still answer 200 with the running model's fit, never 500."""
    db = stored_sqlite(tmp_path)
    _age_stored_fit(db)
    _refuse_writes(db, monkeypatch)
    client = sqlite_app(tmp_path).test_client()
    listed, detail = client.get("/v1/workloads"), client.get("/v1/workloads/my-resnet")
    assert (listed.status_code, detail.status_code) == (200, 200), (listed.json, detail.json)
    assert listed.json["workloads"][0]["model_version"] == detail.json["model_version"] == MODEL_VERSION
    con = sqlite3.connect(db)
    try:
        assert f'"{OLD_MODEL_VERSION}"' in con.execute("SELECT fit FROM workloads").fetchone()[0]  # not written
    finally:
        con.close()


def _listed_versions(client) -> dict[str, str]:
    listed = client.get("/v1/workloads?limit=10")
    assert listed.status_code == 200, listed.json
    return {w["id"]: w["model_version"] for w in listed.json["workloads"]}


def test_a_listing_refits_stale_fits_for_at_most_its_budget_and_lists_the_rest_as_stored(tmp_path, monkeypatch):
    """After an upgrade a listing is not a refit of every workload on its page (1,000 of them, no key needed):
    past :data:`LISTING_REFIT_S` of refits it lists the rest as stored, their older model version shown, and a
    later read refits them."""
    age_stored_fits(stored_sqlite(tmp_path, [row for name in ("w1", "w2", "w3") for row in published_rows(as_id=name)]))
    client = sqlite_app(tmp_path).test_client()
    monkeypatch.setattr(workloads_module, "LISTING_REFIT_S", 0.0)
    assert _listed_versions(client) == dict.fromkeys(("w1", "w2", "w3"), OLD_MODEL_VERSION)
    assert client.get("/v1/workloads/w2").json["model_version"] == MODEL_VERSION  # refitted and stored
    assert _listed_versions(client) == {"w1": OLD_MODEL_VERSION, "w2": MODEL_VERSION, "w3": OLD_MODEL_VERSION}
    monkeypatch.setattr(workloads_module, "LISTING_REFIT_S", 60.0)
    assert _listed_versions(client) == dict.fromkeys(("w1", "w2", "w3"), MODEL_VERSION)
    monkeypatch.setattr(workloads_module, "LISTING_REFIT_S", 0.0)
    assert _listed_versions(client) == dict.fromkeys(("w1", "w2", "w3"), MODEL_VERSION)  # stored, not cached


# -- an older PostgreSQL database, a role that may not CREATE -------------------------------------------
@pytest.mark.parametrize("role_setting", ["", "default_transaction_read_only = on"])
def test_an_older_postgresql_database_opens_for_a_role_without_create(make_app, database_url, role_setting):
    if not database_url:
        pytest.skip("PostgreSQL only (JETPREDICT_TEST_DATABASE_URL)")
    admin = make_app()
    assert admin.test_client().post("/v1/profiles", json={"rows": published_rows()},
                                    headers=AUTH).status_code == 201
    role = "jetpredict_no_create"
    with admin.extensions["jetpredict"].storage.engine.begin() as conn:
        conn.execute(sa.text("DROP TABLE jetpredict_meta"))
        if not conn.execute(sa.text("SELECT 1 FROM pg_roles WHERE rolname = :r"), {"r": role}).first():
            conn.execute(sa.text(f"CREATE ROLE {role} LOGIN"))
        conn.execute(sa.text(f"ALTER ROLE {role} RESET ALL"))
        if role_setting:  # as a hot standby refuses every write
            conn.execute(sa.text(f"ALTER ROLE {role} SET {role_setting}"))
        conn.execute(sa.text(f"GRANT USAGE ON SCHEMA public TO {role}"))
        conn.execute(sa.text(f"REVOKE CREATE ON SCHEMA public FROM {role}"))
        conn.execute(sa.text(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {role}"))
        conn.execute(sa.text(f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {role}"))
    admin.extensions["jetpredict"].storage.dispose()
    url = sa.engine.make_url(database_url).set(username=role).render_as_string(hide_password=False)
    storage = Storage(url)
    try:
        storage.create_schema()  # no ProgrammingError (42501) / InternalError (25006)
        with storage.engine.connect() as conn:
            assert not sa.inspect(conn).has_table("jetpredict_meta")  # served unstamped
    finally:
        storage.dispose()
    app = make_app(DATABASE_URL=url)
    assert app.extensions["jetpredict"].schema_ready
    assert app.test_client().get("/v1/workloads/my-resnet").status_code == 200
    stamped = make_app()  # a start that may CREATE stamps it
    with stamped.extensions["jetpredict"].storage.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT value FROM jetpredict_meta")).scalar() == str(FORMAT_VERSION)


# -- /healthz and the SQLite file ------------------------------------------------------------------------
def test_healthz_is_degraded_once_the_sqlite_file_is_moved_aside(tmp_path):
    client = sqlite_app(tmp_path).test_client()
    assert client.post("/v1/profiles", json={"rows": published_rows()}, headers=AUTH).status_code == 201
    assert client.get("/healthz").status_code == 200
    db = tmp_path / "jetpredict.sqlite"
    os.rename(db, tmp_path / "moved.sqlite")
    r = client.get("/healthz")
    assert r.status_code == 503 and r.json["status"] == "degraded", r.json
    assert str(db) in r.json["database"] and "restart" in r.json["database"], r.json


def test_quick_check_runs_at_most_once_per_interval_and_still_findsdamage_sqlite(tmp_path, monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(health, "_now", lambda: clock[0])
    checks = []
    quick_check = sqlite_setup.quick_check
    monkeypatch.setattr(sqlite_setup, "quick_check", lambda conn: checks.append(1) or quick_check(conn))
    client = sqlite_app(tmp_path).test_client()
    for i in range(5):  # a busy service: writes between probes, within the interval
        assert client.post("/v1/profiles", json={"rows": published_rows(as_id=f"w{i}")},
                           headers=AUTH).status_code == 201
        assert client.get("/healthz").status_code == 200
    assert len(checks) == 1
    clock[0] += health.QUICK_CHECK_INTERVAL_S
    assert client.get("/healthz").status_code == 200 and len(checks) == 2  # the file changed meanwhile
    assert client.get("/healthz").status_code == 200 and len(checks) == 2  # unchanged since
    db = str(tmp_path / "jetpredict.sqlite")
    con = sqlite3.connect(db)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the rows' page in the file, not in the WAL
    con.close()
    damage_sqlite(db, "midpage")
    clock[0] += health.QUICK_CHECK_INTERVAL_S
    r = client.get("/healthz")
    assert r.status_code == 503 and "is damaged" in r.json["database"] and db in r.json["database"], r.json
    assert len(checks) == 3
