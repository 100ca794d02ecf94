"""A SQLite file deleted or replaced under a running service: the pool's connections still write to the old
file, which is gone at the next start, so every write is refused with 503 and the reason (an upload had
answered 201 and was lost on restart). Never a 500."""

from __future__ import annotations

import os
import shutil

import pytest
from api_fixtures import API_KEY, published_rows, sqlite_app

AUTH = {"X-API-Key": API_KEY}


def _stored_app(tmp_path):
    app = sqlite_app(tmp_path)
    client = app.test_client()
    assert client.post("/v1/profiles", json={"rows": published_rows()}, headers=AUTH).status_code == 201
    return app, client, str(tmp_path / "jetpredict.sqlite")


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_writes_are_refused_once_the_sqlite_file_is_deleted_or_replaced(tmp_path, how):
    app, client, db = _stored_app(tmp_path)
    if how == "deleted":
        os.unlink(db)
        said = "No such file or directory"
    else:  # a copy put in its place: another inode, which the pool's connections do not write to
        shutil.copyfile(db, f"{db}.copy")
        os.replace(f"{db}.copy", db)
        said = "replaced by another file"
    answers = [client.post("/v1/profiles", json={"rows": published_rows(as_id="other")}, headers=AUTH),
               client.delete("/v1/workloads/my-resnet", headers=AUTH)]
    for r in answers:
        assert r.status_code == 503, (r.status_code, r.json)
        assert said in r.json["message"] and db in r.json["message"] and "restart" in r.json["message"], r.json
        assert r.json["errors"]["database"][0].startswith("cannot write:"), r.json
        assert r.headers["Retry-After"]
    health = client.get("/healthz")
    assert health.status_code == 503 and said in health.json["database"], health.json
    app.extensions["jetpredict"].storage.dispose()
    # After a restart nothing answered 201 is missing: the refused upload was never acknowledged.
    restarted = sqlite_app(tmp_path).test_client()
    assert restarted.get("/v1/workloads/other").status_code == 404


def test_a_file_moved_back_serves_writes_again(tmp_path):
    app, client, db = _stored_app(tmp_path)
    os.rename(db, f"{db}.aside")
    assert client.post("/v1/profiles", json={"rows": published_rows(as_id="other")}, headers=AUTH).status_code == 503
    os.rename(f"{db}.aside", db)  # the same file (inode) back: nothing was lost
    assert client.post("/v1/profiles", json={"rows": published_rows(as_id="other")}, headers=AUTH).status_code == 201
    assert client.get("/healthz").status_code == 200
    app.extensions["jetpredict"].storage.dispose()
    assert sqlite_app(tmp_path).test_client().get("/v1/workloads/other").status_code == 200


def test_a_connection_opened_after_the_file_was_replaced_writes_nothing_either(tmp_path):
    """The file the service first opened is the one checked, whichever pooled connection serves a write: a
    connection opened after the replacement (the pool's one held elsewhere, as by another request's thread)
    does not take the new file as the one to trust, while the old connections still write to the old file."""
    app, client, db = _stored_app(tmp_path)
    shutil.copyfile(db, f"{db}.copy")
    os.replace(f"{db}.copy", db)
    with app.extensions["jetpredict"].storage.engine.connect():  # held: the upload needs a new connection
        upload = client.post("/v1/profiles", json={"rows": published_rows(as_id="other")}, headers=AUTH)
    assert upload.status_code == 503 and "replaced by another file" in upload.json["message"], upload.json
    app.extensions["jetpredict"].storage.dispose()
    assert sqlite_app(tmp_path).test_client().get("/v1/workloads/other").status_code == 404
