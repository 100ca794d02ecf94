"""Small things an operator's walk of ``serve`` found: the pool's tracebacks on each outage, a flag the chosen
server ignores, a chunked body's size, the banner's grammar, a busy port's exit status, the help's variables."""

from __future__ import annotations

import io
import logging

import pytest

from tools.testing import TempPostgres, busy_port, postgres_available


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.skipif(not postgres_available(), reason="PostgreSQL server binaries not installed")
def test_an_outage_logs_no_pool_traceback_only_one_line(tmp_path, caplog):
    """A connection held across the outage fails its reset on return to the pool: SQLAlchemy logged that at
    ERROR with two chained tracebacks, on every outage."""
    from api_fixtures import API_KEY, NO_RATE_LIMITS, published_rows
    from jetpredict.api.app import create_app

    body = {"device": "agx-xavier", "workload": {"id": "my-resnet"}, "modes": "presets"}
    with TempPostgres() as pg:
        app = create_app({"DATA_DIR": tmp_path, "API_KEYS": API_KEY, "DATABASE_URL": pg.create_database("nits"),
                          **NO_RATE_LIMITS})
        client = app.test_client()
        assert client.post("/v1/profiles", json={"rows": published_rows()}, headers={"X-API-Key": API_KEY}
                           ).status_code == 201
        assert client.post("/v1/predictions", json=body).status_code == 200  # holds a connection (revision)
        pg.stop_server()
        with caplog.at_level(logging.DEBUG, logger="sqlalchemy.pool"):
            assert client.post("/v1/predictions", json=body).status_code == 503
        app.extensions["jetpredict"].storage.dispose()
    loud = [r for r in caplog.records if r.name.startswith("sqlalchemy.pool") and r.levelno >= logging.WARNING]
    assert loud, "the outage no longer makes the pool warn: this test needs another way in"
    assert all(r.exc_info is None and r.levelno < logging.ERROR for r in loud), [(r.levelname, r.msg) for r in loud]
    assert all("\n" not in r.getMessage() and "OperationalError: " in r.getMessage() for r in loud)


def test_a_chunked_body_over_the_limit_says_more_than_the_limit(make_app):
    client = make_app(MAX_BODY_BYTES=1200).test_client()
    r = client.post("/v1/predictions", input_stream=io.BytesIO(b"x" * 5000), content_type="application/json",
                    headers={"Transfer-Encoding": "chunked"}, environ_overrides={"wsgi.input_terminated": True})
    assert r.status_code == 413
    assert r.json["message"] == "request body is more than 1200 bytes; the limit is 1200", r.json


def test_serve_warns_that_flask_ignores_workers(clean_env, capsys, tmp_path):
    from jetpredict.cli import main

    with busy_port() as port:
        assert main(["serve", "--server", "flask", "--workers", "4", "--port", str(port),
                     "--data-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "warning: --workers 4 is ignored: Flask's server runs one process" in err, err
    assert err.count("the port is in use") == 1


def test_help_names_every_variable(capsys):
    from jetpredict.cli import main

    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    for variable in ("JETPREDICT_HOST", "JETPREDICT_PORT", "JETPREDICT_WORKERS", "JETPREDICT_THREADS",
                     "JETPREDICT_DATA_DIR", "JETPREDICT_DATABASE_URL", "JETPREDICT_MAX_BODY_BYTES",
                     "JETPREDICT_CORS_ORIGINS"):
        assert variable in out, variable


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_serve_says_an_unreachable_database_once_at_start(tmp_path):
    from tools.testing import free_port, serve_start_lines

    url = f"postgresql://jp@127.0.0.1:{free_port()}/jp"  # nothing listens: an outage, served with 503
    said = serve_start_lines(url, tmp_path, {"JETPREDICT_API_KEYS": "k"})
    assert "listening on" in said and said.count("Connection refused") == 1, said
