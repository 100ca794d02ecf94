"""Database URLs that cannot be parsed, and what a driver said of a refused connection: in words, with the
URL's secrets hidden (PostgreSQL servers refusing a URL: ``test_api_postgres``)."""

from __future__ import annotations

import logging

import pytest
import sqlalchemy as sa
from jetpredict.api.database_url import (
    MAX_REASON_CHARS,
    checked_url,
    driver_reason,
    masked_url,
    refused_as_given,
)
from jetpredict.api.store_failures import StoreRefused
from jetpredict.models.errors import InputError

BAD_PORT = "postgresql://u:s3cret@db.example:notaport/jp"


def test_a_port_that_is_not_a_number_is_refused_naming_the_rule():
    assert masked_url(BAD_PORT) == "<unparseable database URL>"
    with pytest.raises(InputError) as err:
        checked_url(BAD_PORT)
    assert err.value.field == "database_url" and "PORT a number" in err.value.message
    assert "s3cret" not in err.value.message


def test_serve_exits_2_in_one_line_for_a_port_that_is_not_a_number(capsys):
    from jetpredict.cli import main

    assert main(["serve", "--port", "1", "--database-url", BAD_PORT]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "jetpredict serve: error: the database URL" in err
    assert "(--database-url, JETPREDICT_DATABASE_URL)" in err and "PORT a number" in err
    assert "Traceback" not in err and "s3cret" not in err


def _refused(message: str) -> sa.exc.OperationalError:
    """An error as SQLAlchemy wraps the driver's (``orig``) when a connection fails."""
    return sa.exc.OperationalError("connect", {}, Exception(message))


@pytest.mark.parametrize("url", [
    "postgresql+psycopg://jp:pw%2Fx%40y@db:5432/jp",
    "postgresql+psycopg://jp@db:5432/jp?password=pw%2Fx%40y&sslmode=require",
])
def test_the_driver_reason_hides_the_url_password_in_any_form(url):
    said = _refused('connection failed: FATAL:  password authentication failed for user "jp"\n'
                    "dsn was password=pw/x@y, quoted pw%2Fx%40y")
    reason = driver_reason(said, url)
    assert "pw/x@y" not in reason and "pw%2Fx%40y" not in reason and reason.count("***") == 2
    assert reason.startswith('connection failed: FATAL: password authentication failed for user "jp"')
    assert "\n" not in reason and "sqlalche.me" not in reason  # the driver's words, not SQLAlchemy's hint


def test_the_driver_reason_is_short():
    assert len(driver_reason(_refused("x" * 5000), "sqlite:///db.sqlite")) == MAX_REASON_CHARS


@pytest.mark.parametrize(("message", "as_given"), [
    ('connection to server at "127.0.0.1", port 5432 failed: FATAL:  password authentication failed for user "jp"',
     True),
    ('connection to server at "127.0.0.1", port 5432 failed: FATAL:  database "nodb" does not exist', True),
    ('connection to server at "127.0.0.1", port 5432 failed: FATAL:  role "nobody" does not exist', True),
    ('FATAL:  no pg_hba.conf entry for host "10.0.0.2", user "jp", database "jp", no encryption', True),
    ('connection to server at "127.0.0.1", port 1 failed: Connection refused', False),
    ("failed to resolve host 'db': [Errno -2] Name or service not known", False),
    ("FATAL:  the database system is starting up", False),
    ("FATAL:  sorry, too many clients already", False),
])
def test_only_a_refusal_of_what_the_url_says_is_a_configuration_error(message, as_given):
    assert refused_as_given(_refused(message)) is as_given


def test_a_worker_logs_why_the_database_is_unreachable_at_start(tmp_path, caplog):
    """Each worker says the driver's reason (a SQLite file it cannot open here), not only the error's class."""
    from api_fixtures import API_KEY, NO_RATE_LIMITS
    from jetpredict.api.app import create_app

    (tmp_path / "a-dir.sqlite").mkdir()  # a folder where the database file should be: cannot be opened
    url = f"sqlite:///{tmp_path / 'a-dir.sqlite'}"
    logger = logging.getLogger("jetpredict.api")
    logger.addHandler(caplog.handler)
    try:
        with caplog.at_level(logging.WARNING, logger="jetpredict.api"):
            app = create_app({"DATA_DIR": tmp_path, "API_KEYS": API_KEY, "DATABASE_URL": url, **NO_RATE_LIMITS})
            assert app.test_client().get("/v1/workloads").status_code == 503
    finally:
        logger.removeHandler(caplog.handler)
    said = [r.getMessage() for r in caplog.records if "unreachable at start" in r.getMessage()]
    assert said and "OperationalError: unable to open database file" in said[0], said
    app.extensions["jetpredict"].storage.dispose()


def test_a_password_that_is_also_a_name_of_the_url_leaves_the_names_readable():
    """``postgres:postgres@postgres/postgres`` (a compose file's default): masking the password everywhere
    would turn the user, host and database the driver names into ``***``."""
    said = _refused('connection to server at "postgres" (172.18.0.2), port 5432 failed: FATAL:  password '
                    'authentication failed for user "postgres"')
    reason = driver_reason(said, "postgresql+psycopg://postgres:postgres@postgres:5432/postgres")
    assert 'user "postgres"' in reason and '"postgres" (172.18.0.2)' in reason and "***" not in reason


@pytest.mark.parametrize(("fault", "said_words"), [
    (lambda: _refused('FATAL:  password authentication failed for user "jp"'),
     ("refused the connection", "password authentication failed", "check the user, password, database name and options")),
    (lambda: StoreRefused("the database holds format 99; this jetpredict reads up to 1: upgrade jetpredict"),
     ("format 99",)),
], ids=["refused URL", "newer format"])
def test_a_worker_says_what_an_operator_must_fix_at_start(tmp_path, caplog, monkeypatch, fault, said_words):
    """A bare WSGI app (no ``serve`` to exit 2) logs a refused password or a store of a newer format as an
    error saying what to fix, not as an outage to wait out; it answers 503 meanwhile."""
    from api_fixtures import API_KEY, NO_RATE_LIMITS
    from jetpredict.api.app import create_app
    from jetpredict.api.storage import Storage

    def refuse(self) -> None:
        raise fault()

    monkeypatch.setattr(Storage, "create_schema", refuse)
    logger = logging.getLogger("jetpredict.api")
    logger.addHandler(caplog.handler)
    try:
        with caplog.at_level(logging.WARNING, logger="jetpredict.api"):
            app = create_app({"DATA_DIR": tmp_path, "API_KEYS": API_KEY, **NO_RATE_LIMITS})
            assert app.test_client().get("/v1/workloads").status_code == 503
    finally:
        logger.removeHandler(caplog.handler)
    said = [r for r in caplog.records if said_words[0] in r.getMessage()]
    assert said and said[0].levelno == logging.ERROR and "unreachable" not in said[0].getMessage()
    assert all(words in said[0].getMessage() for words in said_words)
    app.extensions["jetpredict"].storage.dispose()


def test_answers_and_the_health_check_say_the_database_refused_the_url(tmp_path, monkeypatch):
    """A password changed under a running service: every answer (503) and ``/healthz`` name the refusal in the
    driver's words (through :func:`driver_reason`, which hides the URL's secrets), not "cannot be reached" as an
    outage to wait out."""
    from api_fixtures import API_KEY, NO_RATE_LIMITS
    from jetpredict.api.app import create_app
    from jetpredict.api.storage import Storage

    def refuse(self, *args, **kwargs):
        raise _refused('FATAL:  password authentication failed for user "jp"')

    app = create_app({"DATA_DIR": tmp_path, "API_KEYS": API_KEY, **NO_RATE_LIMITS})
    client = app.test_client()
    assert client.get("/v1/workloads").status_code == 200
    monkeypatch.setattr(Storage, "create_schema", refuse)
    monkeypatch.setattr(sa.engine.Engine, "connect", refuse)
    answer = client.get("/v1/workloads")
    body = answer.get_json()
    assert answer.status_code == 503 and answer.headers["Retry-After"]
    assert "refused the connection" in body["message"] and "password authentication failed" in body["message"]
    assert "check the user, password, database name and options" in body["message"]
    assert body["errors"]["database"][0].startswith("refused: ")
    health = client.get("/healthz")
    assert health.status_code == 503 and health.get_json()["database"].startswith("the database ")
    assert "refused the connection" in health.get_json()["database"]
    monkeypatch.undo()
    app.extensions["jetpredict"].storage.dispose()
