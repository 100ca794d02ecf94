"""Fixtures for the HTTP service tests: an app on SQLite and, when a test database is given, on PostgreSQL.

``JETPREDICT_TEST_DATABASE_URL`` (e.g. ``postgresql://postgres@127.0.0.1:5432/jetpredict_test``, as
``.ci/run`` sets it) runs every test that uses ``app``/``client``/``database_url`` on SQLite **and** on that
database (one per test process: ``api_fixtures.process_database_url``), emptied (schema ``public`` dropped and
recreated) before each test.
Rate limits are off here (loopback tests); their own test turns them on.

The page's browser tests (``test_page_browser*.py``) share a real service, a second one for the tests that
store workloads, and one headless Chromium, per test process: each start costs seconds.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest
from api_fixtures import API_KEY, NO_RATE_LIMITS, TEST_DATABASE_ENV, process_database_url, published_rows
from jetpredict.api import workloads as workloads_module
from jetpredict.api.serve_cli import _FLAGS

BACKENDS = ["sqlite"] + (["postgresql"] if os.environ.get(TEST_DATABASE_ENV) else [])


@pytest.fixture
def clean_env(monkeypatch):
    """No JETPREDICT_* setting that serve reads or exports outlives the test."""
    for name in (*_FLAGS.values(), "API_KEYS"):  # every setting serve exports, and the keys it reads
        monkeypatch.setenv(f"JETPREDICT_{name}", "")  # recorded, so a value serve exports is undone
        monkeypatch.delenv(f"JETPREDICT_{name}")
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", "")
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR")
    return monkeypatch


@pytest.fixture(params=BACKENDS)
def database_url(request) -> str:
    """"" (SQLite under the app's DATA_DIR) or the emptied PostgreSQL test database."""
    if request.param == "sqlite":
        return ""
    from tools.testing import empty_postgresql

    url = process_database_url()
    empty_postgresql(url)
    return url


@pytest.fixture
def make_app(tmp_path, database_url):
    """Build apps on this test's database (several share it, as workers of one service do)."""
    from jetpredict.api.app import create_app

    apps = []

    def make(**config):
        app = create_app({"DATA_DIR": tmp_path, "API_KEYS": f"{API_KEY}, test-key-2", "TESTING": True,
                          "DATABASE_URL": database_url, **NO_RATE_LIMITS, **config})
        apps.append(app)
        return app

    yield make
    for app in apps:
        app.extensions["jetpredict"].storage.dispose()


@pytest.fixture
def app(make_app):
    return make_app()


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def auth():
    return {"X-API-Key": API_KEY}


#: Both ways an upload stores: optimistic tries, or straight to the write lock (as after three lost tries).
@pytest.fixture(params=[workloads_module._OPTIMISTIC_TRIES, 0], ids=["optimistic", "locked"])
def take_upload_path(request, monkeypatch) -> Callable[[], None]:
    """Each test once per upload path: optimistic tries first, or (0) straight to the store's lock. Calling the
    function returned sends the uploads from then on down that path (a test's setup uploads take the default)."""
    return lambda: monkeypatch.setattr(workloads_module, "_OPTIMISTIC_TRIES", request.param)


@pytest.fixture
def stored(client, auth):
    """A workload ``my-resnet`` uploaded from 4 published AGX Xavier rows."""
    r = client.post("/v1/profiles", json={"rows": published_rows()}, headers=auth)
    assert r.status_code == 201, r.json
    return r.json


# -- the page's browser tests: one of each per test process, across their files --------------------------
@pytest.fixture(scope="session")
def server(tmp_path_factory):
    """A real ``jetpredict serve`` (one worker) for the page's browser tests."""
    from tools.testing import LiveServer

    with LiveServer(tmp_path_factory.mktemp("page-server"), workers=1) as live:
        yield live


@pytest.fixture(scope="session")
def stored_server(tmp_path_factory):
    """A service of its own for the browser tests that store workloads: the shared one's stored list is
    counted."""
    from tools.testing import LiveServer

    with LiveServer(tmp_path_factory.mktemp("page-stored-server"), workers=1) as live:
        yield live


@pytest.fixture(scope="session")
def browser():
    """A headless Chromium (1280 x 1000), cut off from every host but the loopback one. Shared by the tests
    of a process: they count its errors and requests from their own start."""
    from tools.browser import Browser

    with Browser(width=1280, height=1000, offline=True) as b:
        yield b
