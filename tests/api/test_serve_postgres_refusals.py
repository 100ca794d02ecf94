"""``serve`` against a PostgreSQL server that refuses what the URL or the role allows: each is a configuration
error an operator must fix, said in one line naming --database-url and exit 2, never a traceback, never a
service answering 503 for ever, never the password."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from tools.testing import TempPostgres, busy_port, postgres_available

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not postgres_available(),
                                                   reason="PostgreSQL server binaries not installed")]
PASSWORD = "pw-s3cret-77"


@pytest.fixture(scope="module")
def pg():
    """A cluster with role ``jpr`` (LOGIN, no CREATE in schema public of ``jp``: PostgreSQL 15's default for a
    non-owner), ``nolog`` (no LOGIN) and database ``closed`` without CONNECT for PUBLIC."""
    with TempPostgres() as cluster:
        engine = sa.create_engine(cluster.url(), isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as conn:
                for sql in (f"CREATE ROLE jpr LOGIN PASSWORD '{PASSWORD}'", "CREATE ROLE nolog NOLOGIN",
                            "CREATE DATABASE jp", "CREATE DATABASE closed",
                            "REVOKE CONNECT ON DATABASE closed FROM PUBLIC"):
                    conn.execute(sa.text(sql))
        finally:
            engine.dispose()
        with sa.create_engine(cluster.url("jp"), isolation_level="AUTOCOMMIT").connect() as conn:
            conn.execute(sa.text("REVOKE CREATE ON SCHEMA public FROM PUBLIC"))  # as PostgreSQL 15 makes it
        yield cluster


def _serve_error(url: str, capsys, clean_env) -> str:
    from jetpredict.cli import main

    clean_env.setenv("JETPREDICT_API_KEYS", "k")  # no line about a key made for the run

    with busy_port() as port:  # a store that passes stops at the port (naming --port), never serves
        code = main(["serve", "--server", "flask", "--port", str(port), "--database-url", url])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err and PASSWORD not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("jetpredict serve: error: "), err
    assert "--database-url" in err and "JETPREDICT_DATABASE_URL" in err, err
    return err


def test_a_role_that_cannot_create_the_tables_is_told_the_grant(pg, clean_env, capsys):
    err = _serve_error(f"postgresql://jpr:{PASSWORD}@127.0.0.1:{pg.port}/jp", capsys, clean_env)
    assert "GRANT CREATE ON SCHEMA public TO jpr" in err and "(permission denied for schema public):" in err


@pytest.mark.parametrize("user, database, query, said", [
    ("jpr", "closed", "", 'permission denied for database "closed"'),
    ("nolog", "jp", "", 'role "nolog" is not permitted to log in'),
    ("jpr", "jp", "?sslmode=require", "server does not support SSL, but SSL was required"),
    ("jpr", "jp", "?sslmode=requir", 'invalid sslmode value: "requir"'),
])
def test_refusals_only_an_operator_can_fix_stop_serve(pg, clean_env, capsys, user, database, query, said):
    err = _serve_error(f"postgresql://{user}:{PASSWORD}@127.0.0.1:{pg.port}/{database}{query}", capsys, clean_env)
    assert said in err


@pytest.mark.parametrize("option", ["sslmod=require", "bogusopt=1"])
def test_a_misspelt_connection_option_is_named(pg, clean_env, capsys, option):
    err = _serve_error(f"postgresql://jpr:{PASSWORD}@127.0.0.1:{pg.port}/jp?{option}", capsys, clean_env)
    assert f'invalid connection option "{option.split("=")[0]}"' in err
