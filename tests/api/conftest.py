"""Fixtures for the HTTP service tests: an app on a temporary SQLite file, API keys, profile rows."""

from __future__ import annotations

import pytest
from api_fixtures import API_KEY, published_rows


@pytest.fixture
def app(tmp_path):
    from jetpredict.api.app import create_app

    return create_app({"DATA_DIR": tmp_path, "API_KEYS": f"{API_KEY}, test-key-2", "TESTING": True,
                       "DATABASE_URL": ""})


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def auth():
    return {"X-API-Key": API_KEY}


@pytest.fixture
def stored(client, auth):
    """A workload ``my-resnet`` uploaded from 4 published AGX Xavier rows."""
    r = client.post("/v1/profiles", json={"rows": published_rows()}, headers=auth)
    assert r.status_code == 201, r.json
    return r.json
