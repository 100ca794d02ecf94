"""Schema creation under concurrent first boots, on SQLite and (with a test database) PostgreSQL; the
``serve`` banner never prints a database password. ``bench/api_boots.py`` runs five gunicorn boots."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import sqlalchemy as sa
from api_fixtures import TEST_DATABASE_ENV, process_database_url
from jetpredict.api.storage import Storage, metadata

from tools.testing import (
    TempPostgres,
    database_of_process,
    empty_postgresql,
    free_port,
    gunicorn_first_boot,
    postgres_available,
    serve_start_lines,
)

pytestmark = pytest.mark.slow  # starts processes or servers (see README: the fast pass)


def test_concurrent_first_boots_create_the_schema_once(database_url, tmp_path):
    url = database_url or f"sqlite:///{tmp_path / 'boot.sqlite'}"
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def boot() -> None:
        storage = Storage(url)
        try:
            barrier.wait()
            storage.create_schema()
        except BaseException as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)
        finally:
            storage.dispose()

    threads = [threading.Thread(target=boot) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    storage = Storage(url)
    assert set(metadata.tables) <= set(sa.inspect(storage.engine).get_table_names())
    storage.dispose()


@pytest.mark.timeout(180)
@pytest.mark.skipif(not os.environ.get(TEST_DATABASE_ENV), reason=f"needs {TEST_DATABASE_ENV} (PostgreSQL)")
def test_gunicorn_four_workers_boot_on_an_empty_postgresql_database(tmp_path):
    url = process_database_url()
    empty_postgresql(url)
    result = gunicorn_first_boot(url, workers=4, work_dir=tmp_path)
    assert result["ok"], result["log_tail"]
    empty_postgresql(url)  # leave the test database as the other tests expect it


@pytest.mark.timeout(60)
def test_serve_banner_hides_the_database_password(tmp_path):
    # Nothing listens there: serve still starts (503 until the database is back) and prints its banner.
    url = f"postgresql://jp:pw-in-userinfo@127.0.0.1:{free_port()}/jp?password=pw-in-query&sslmode=disable"
    text = serve_start_lines(url, tmp_path, {"JETPREDICT_API_KEYS": "k", "JETPREDICT_RATE_LIMIT": "off"})
    assert "listening on" in text, text
    assert "pw-in-userinfo" not in text and "pw-in-query" not in text
    assert "sslmode=disable" in text and "127.0.0.1" in text


@pytest.mark.timeout(180)
@pytest.mark.skipif(not postgres_available(), reason="PostgreSQL server binaries not installed")
def test_serve_exits_2_at_start_naming_a_wrong_password_or_database(tmp_path):
    """A server that refuses what the URL says is a configuration error: ``serve`` says the driver's reason
    and exits 2 (it had answered 503 for ever, saying only "OperationalError"); the password never shows."""
    with TempPostgres() as pg:
        engine = sa.create_engine(pg.url(), isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as conn:
                conn.execute(sa.text("CREATE ROLE jp LOGIN PASSWORD 'right-pw-123'"))
                conn.execute(sa.text("CREATE DATABASE jp OWNER jp"))
                hba = conn.execute(sa.text("SHOW hba_file")).scalar_one()
                # Passwords checked for jp over TCP (the cluster trusts every user as made).
                Path(hba).write_text("local all all trust\nhost all postgres 127.0.0.1/32 trust\n"
                                     "host all all 127.0.0.1/32 scram-sha-256\n")
                conn.execute(sa.text("SELECT pg_reload_conf()"))
        finally:
            engine.dispose()
        env = {**os.environ, "JETPREDICT_API_KEYS": "k", "JETPREDICT_RATE_LIMIT": "off"}
        for password, database, said in [("wrong-pw-456", "jp", 'password authentication failed for user "jp"'),
                                         ("right-pw-123", "nodb", 'database "nodb" does not exist')]:
            url = f"postgresql://jp:{password}@127.0.0.1:{pg.port}/{database}"
            done = subprocess.run([sys.executable, "-m", "jetpredict", "serve", "--server", "flask", "--port",
                                   str(free_port()), "--database-url", url, "--data-dir", str(tmp_path)],
                                  env=env, capture_output=True, text=True, timeout=60)
            assert done.returncode == 2 and said in done.stderr, done.stderr
            assert "jetpredict serve: error: the database postgresql+psycopg://jp:***@" in done.stderr
            assert password not in done.stderr + done.stdout and "Traceback" not in done.stderr


@pytest.mark.timeout(120)
@pytest.mark.skipif(not postgres_available(), reason="PostgreSQL server binaries not installed")
def test_postgresql_going_down_answers_503_and_recovers(tmp_path):
    from api_fixtures import API_KEY, NO_RATE_LIMITS, published_rows
    from jetpredict.api.app import create_app

    with TempPostgres() as pg:
        url = pg.create_database("updown")
        app = create_app({"DATA_DIR": tmp_path, "API_KEYS": API_KEY, "DATABASE_URL": url, **NO_RATE_LIMITS})
        client = app.test_client()
        body = {"workload": {"id": "my-resnet"}, "modes": "presets"}
        assert client.post("/v1/profiles", json={"rows": published_rows()},
                           headers={"X-API-Key": API_KEY}).status_code == 201
        assert client.post("/v1/predictions", json=body).status_code == 200
        pg.stop_server()
        for method, path, kwargs in [("post", "/v1/predictions", {"json": body}), ("get", "/v1/workloads", {}),
                                     ("get", "/healthz", {})]:
            r = getattr(client, method)(path, **kwargs)
            assert r.status_code == 503, (path, r.status_code, r.get_data(as_text=True)[:300])
        pg.start_server()
        assert client.post("/v1/predictions", json=body).status_code == 200  # pooled connections renewed
        assert client.get("/healthz").json["database"] == "ok"
        app.extensions["jetpredict"].storage.dispose()


@pytest.mark.timeout(120)
@pytest.mark.skipif(not postgres_available(), reason="PostgreSQL server binaries not installed")
def test_each_test_process_empties_only_its_own_database():
    """pytest-xdist runs the suite in several processes, and every PostgreSQL test empties its database first:
    each process gets a database of its own on the same server, so one never drops another's tables."""
    with TempPostgres() as pg:
        given = pg.url("jetpredict_test").replace("+psycopg", "")
        pg.create_database("jetpredict_test")
        urls = {p: database_of_process(given, p) for p in ("gw0", "gw1")}
        assert urls["gw0"].endswith("/jetpredict_test_gw0") and urls["gw1"].endswith("/jetpredict_test_gw1")
        assert database_of_process(given, None) == given and database_of_process(given, "") == given
        assert database_of_process(given, "gw1") == urls["gw1"]  # already there: the same, not recreated
        with pytest.raises(ValueError, match="test process name"):
            database_of_process(given, "gw0; DROP")
        stores = {p: Storage(u) for p, u in urls.items()}
        try:
            for s in stores.values():
                s.create_schema()
            empty_postgresql(urls["gw0"])
            assert set(metadata.tables) <= set(sa.inspect(stores["gw1"].engine).get_table_names())
            assert not set(metadata.tables) & set(sa.inspect(stores["gw0"].engine).get_table_names())
        finally:
            for s in stores.values():
                s.dispose()


@pytest.mark.timeout(120)
@pytest.mark.skipif(not postgres_available(), reason="PostgreSQL server binaries not installed")
def test_an_outage_is_said_with_the_drivers_reason_in_the_log_and_healthz(tmp_path, caplog):
    """The request log and /healthz said only "OperationalError" during an outage; they say what libpq
    said (as the start-up line does), the password hidden."""
    import logging

    from api_fixtures import API_KEY, NO_RATE_LIMITS
    from jetpredict.api.app import create_app

    with TempPostgres() as pg:
        url = pg.create_database("outage").replace("postgres@", "postgres:pw-hidden-9@")
        app = create_app({"DATA_DIR": tmp_path, "API_KEYS": API_KEY, "DATABASE_URL": url, **NO_RATE_LIMITS})
        client = app.test_client()
        assert client.get("/healthz").status_code == 200
        pg.stop_server()
        with caplog.at_level(logging.WARNING, logger="jetpredict.api"):
            listed, health = client.get("/v1/workloads"), client.get("/healthz")
        assert listed.status_code == 503 and health.status_code == 503
        assert "Connection refused" in health.json["database"], health.json
        logged = [r.getMessage() for r in caplog.records if r.name == "jetpredict.api"]
        assert any("database unavailable" in m and "Connection refused" in m for m in logged), logged
        assert not any("pw-hidden-9" in m for m in logged) and "pw-hidden-9" not in health.get_data(as_text=True)
        app.extensions["jetpredict"].storage.dispose()
