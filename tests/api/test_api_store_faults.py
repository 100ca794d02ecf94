"""The store's faults: a damaged SQLite file, a read-only file system, a workload deleted while it is read,
fit summaries stored by an older model, a database written by a newer jetpredict. None is ever a 500."""

from __future__ import annotations

import errno
import json
import logging
import shutil
import sqlite3
import subprocess
import sys
import textwrap

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
from jetpredict.api.routes.profiles import REPLAYED_HEADER
from jetpredict.api.storage import FORMAT_VERSION, Storage

from tools.testing import age_stored_fits

AUTH = {"X-API-Key": API_KEY}
PREDICT = {"device": "agx-xavier", "workload": {"id": "my-resnet"}, "modes": "presets"}


# -- 1. a damaged SQLite file -------------------------------------------------------------------------
@pytest.mark.parametrize("how", ["garbage", "truncated", "midpage"])
def test_a_damaged_sqlite_file_is_503_naming_the_file_and_healthz_is_degraded(tmp_path, how):
    db = stored_sqlite(tmp_path)
    damage_sqlite(db, how)
    client = sqlite_app(tmp_path).test_client()  # the service starts: it answers why it cannot serve
    answers = [client.get("/v1/workloads"), client.get("/v1/workloads/my-resnet"),
               client.post("/v1/predictions", json=PREDICT),
               client.post("/v1/profiles", json={"rows": published_rows(as_id="other")}, headers=AUTH)]
    for r in answers:
        if how == "midpage" and r.status_code in (200, 201):
            continue  # pages a request does not read are not its fault
        assert r.status_code == 503, (r.status_code, r.json)
        assert db in r.json["message"] and "restore" in r.json["message"], r.json
        assert r.json["errors"]["database"][0].startswith("damaged")
    assert any(r.status_code == 503 for r in answers)
    health = client.get("/healthz")
    assert health.status_code == 503 and health.json["status"] == "degraded"
    assert "is damaged" in health.json["database"] and db in health.json["database"]


def test_healthz_is_ok_on_a_sound_sqlite_file(tmp_path):
    stored_sqlite(tmp_path)
    health = sqlite_app(tmp_path).test_client().get("/healthz")
    assert health.status_code == 200 and health.json["database"] == "ok"


@pytest.mark.parametrize("how", ["garbage", "truncated"])
def test_serve_on_a_damaged_file_says_so_in_one_line(tmp_path, how, capsys, monkeypatch):
    from jetpredict.cli import main

    monkeypatch.delenv("JETPREDICT_DATABASE_URL", raising=False)
    monkeypatch.setenv("JETPREDICT_API_KEYS", API_KEY)
    db = stored_sqlite(tmp_path)
    damage_sqlite(db, how)
    assert main(["serve", "--data-dir", str(tmp_path), "--port", "0", "--server", "flask"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    assert db in err[0] and "damaged" in err[0] and "restore" in err[0]


# -- 2. a read-only file system -----------------------------------------------------------------------
def test_a_read_only_lock_folder_does_not_stop_a_service_whose_tables_exist(tmp_path, monkeypatch):
    """The lock file cannot be made (EROFS): the file is opened as on a read-only file system (immutable),
    reads are served, writes are the store's 503 (read-only)."""
    stored_sqlite(tmp_path)

    def refused(path):
        raise OSError(errno.EROFS, "Read-only file system", path)

    monkeypatch.setattr(sqlite_setup, "open_lock_file", refused)
    client = sqlite_app(tmp_path).test_client()
    assert client.get("/v1/workloads").json["total"] == 1
    assert client.post("/v1/predictions", json=PREDICT).status_code == 200
    r = client.post("/v1/profiles", json={"rows": published_rows(as_id="other")}, headers=AUTH)
    assert r.status_code == 503 and "read-only" in r.json["message"]
    # without the tables the error stands: nothing could be served
    with pytest.raises(OSError):
        Storage(f"sqlite:///{tmp_path / 'new' / 'empty.sqlite'}").create_schema()


def _can_mount_read_only() -> bool:
    probe = "d=$(mktemp -d) && mount -t tmpfs none $d && mount -o remount,ro $d; r=$?; umount $d; exit $r"
    if shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "-m", "sh", "-c", probe], capture_output=True).returncode == 0


@pytest.mark.slow
@pytest.mark.skipif(not _can_mount_read_only(), reason="needs a mount namespace (unshare -m, root) for a "
                                                     "read-only file system")
def test_a_service_on_a_read_only_file_system_serves_reads(tmp_path):
    script = textwrap.dedent(f"""
        import sys, json
        sys.path.insert(0, {str(tmp_path.parent)!r})
        sys.path[:0] = {sys.path!r}
        from api_fixtures import API_KEY, NO_RATE_LIMITS, published_rows
        from jetpredict.api.app import create_app
        auth = {{"X-API-Key": API_KEY}}
        app = create_app({{"DATA_DIR": sys.argv[1], "API_KEYS": API_KEY, "DATABASE_URL": "", **NO_RATE_LIMITS}})
        c = app.test_client()
        if sys.argv[2] == "setup":
            assert c.post("/v1/profiles", json={{"rows": published_rows()}}, headers=auth).status_code == 201
        else:
            answers = [c.get("/v1/workloads").status_code, c.post("/v1/predictions", json={PREDICT!r}).status_code,
                       c.post("/v1/profiles", json={{"rows": published_rows(as_id="x")}}, headers=auth).json]
            print(json.dumps(answers))
        app.extensions["jetpredict"].storage.dispose()
        """)
    (tmp_path / "ro_service.py").write_text(script)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    shell = (f"mount -t tmpfs none {mnt} && {sys.executable} {tmp_path}/ro_service.py {mnt}/data setup && "
             f"mount -o remount,ro {mnt} && {sys.executable} {tmp_path}/ro_service.py {mnt}/data read")
    done = subprocess.run(["unshare", "-m", "sh", "-c", shell], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    listed, predicted, upload = json.loads(done.stdout.strip().splitlines()[-1])
    assert listed == 200 and predicted == 200
    assert upload["code"] == 503 and "read-only" in upload["message"], upload


# -- 3. a workload deleted while it is read -------------------------------------------------------------
def test_a_revision_without_rows_is_not_stored_never_500(tmp_path):
    db = stored_sqlite(tmp_path)
    con = sqlite3.connect(db)  # what a read between a concurrent delete's statements could see
    con.execute("DELETE FROM profile_rows")
    con.commit()
    con.close()
    client = sqlite_app(tmp_path).test_client()
    r = client.post("/v1/predictions", json=PREDICT)
    assert r.status_code == 404 and "workload.id" in r.json["errors"], r.json
    assert client.get("/v1/workloads/my-resnet").status_code == 404


def test_a_delete_between_the_reads_of_a_workload_is_never_500(make_app, database_url, monkeypatch):
    """Another worker deletes the workload after this one read its revision, before it read the rows."""
    app = make_app()
    client = app.test_client()
    assert client.post("/v1/profiles", json={"rows": published_rows()}, headers=AUTH).status_code == 201
    svc = app.extensions["jetpredict"]
    svc.workloads._stored.clear()
    other = Storage(svc.storage.url)
    execute = sa.Connection.execute
    fired: list[int] = []

    def execute_then_delete(self, statement, *args, **kwargs):
        result = execute(self, statement, *args, **kwargs)
        text = str(statement)
        if not fired and self.engine is svc.storage.engine and self.in_transaction() and \
                "workloads.revision" in text and "profile_rows" not in text:
            fired.append(1)
            other.delete_workload("my-resnet")
        return result

    monkeypatch.setattr(sa.Connection, "execute", execute_then_delete)
    try:
        r = client.post("/v1/predictions", json=PREDICT)
        assert fired and r.status_code in (200, 404), (r.status_code, r.json)
        assert r.status_code == 200 or "my-resnet" in r.json["message"]
        assert client.post("/v1/profiles", json={"rows": published_rows()}, headers=AUTH).status_code == 201
        fired.clear()
        r = client.get("/v1/workloads/my-resnet")
        assert fired and r.status_code in (200, 404)
        if r.status_code == 200:  # one snapshot: the record and its rows agree
            assert r.json["rows_stored"] == len(r.json["rows"]) == 4
    finally:
        other.dispose()


# -- 4. fit summaries stored by an older model ----------------------------------------------------------
def _age_stored_fit(db: str, rows: list[dict] | None = None) -> None:
    """Make the stored fit look written by an older model, counting 99 modes (and, with ``rows``, replace the
    stored rows)."""
    age_stored_fits(db, profiled_modes=99)
    con = sqlite3.connect(db)
    if rows is not None:
        for (row_id,), row in zip(con.execute("SELECT id FROM profile_rows ORDER BY id").fetchall(), rows,
                                  strict=True):
            con.execute("UPDATE profile_rows SET data = ? WHERE id = ?", (json.dumps(row), row_id))
    con.commit()
    con.close()


def test_the_listing_shows_the_running_models_fit_not_an_older_ones(tmp_path):
    from jetpredict.predictor.model import MODEL_VERSION

    db = stored_sqlite(tmp_path)
    _age_stored_fit(db)
    client = sqlite_app(tmp_path).test_client()
    listed = client.get("/v1/workloads").json["workloads"][0]
    detail = client.get("/v1/workloads/my-resnet").json
    predicted = client.post("/v1/predictions", json=PREDICT).json
    for summary in (listed, detail, *listed["fits"], *detail["fits"]):
        assert summary["model_version"] == MODEL_VERSION == predicted["model_version"]
        assert summary["profiled_modes"] == predicted["profiled_modes"] == 4
    # the refreshed summary is stored (no refit on the next listing), the revision unchanged
    con = sqlite3.connect(db)
    fit, revision = con.execute("SELECT fit, revision FROM workloads").fetchone()
    con.close()
    assert json.loads(fit)["model_version"] == MODEL_VERSION and revision == 1


def _drop_split_source(db: str, answers: bool = False) -> None:
    """Make every stored fit look written before ``split_source`` was kept (the running model version);
    ``answers``: the upload answers kept for replays too (the whole answer and each derived key's entry)."""
    con = sqlite3.connect(db)
    for workload_id, text in con.execute("SELECT id, fit FROM workloads").fetchall():
        fit = json.loads(text)
        for entry in (fit, *fit["devices"].values()):
            entry.pop("split_source")
        con.execute("UPDATE workloads SET fit = ? WHERE id = ?", (json.dumps(fit), workload_id))
    for key, text in con.execute("SELECT key, response FROM idempotency").fetchall() if answers else ():
        response = json.loads(text)
        for entry in (response, *response.get("workloads", ())):
            entry.pop("split_source")
        con.execute("UPDATE idempotency SET response = ? WHERE key = ?", (json.dumps(response), key))
    con.commit()
    con.close()


def test_a_fit_stored_before_split_source_was_kept_is_refreshed_on_reading(tmp_path):
    """A fit of the running model version stored without ``split_source`` (written before it was kept) is
    listed with it, as predictions state it, and stored so (no refit on the next listing)."""
    db = stored_sqlite(tmp_path)
    _drop_split_source(db)
    client = sqlite_app(tmp_path).test_client()
    detail = client.get("/v1/workloads/my-resnet").json
    assert detail["split_source"] == detail["fits"][0]["split_source"] == "components"
    assert client.post("/v1/predictions", json=PREDICT).json["split_source"] == "components"
    con = sqlite3.connect(db)
    assert json.loads(con.execute("SELECT fit FROM workloads").fetchone()[0])["split_source"] == "components"
    con.close()


def _stale_split_source_upload(tmp_path) -> list[dict]:
    """Stores published rows as ``w-upg``, then strips ``split_source`` from its stored fit (a fit stored before the
    field was kept); returns the rows. The first upload carries a key, so an upload of the same rows without one
    is not a replay of it."""
    app = sqlite_app(tmp_path)
    rows = published_rows(as_id="w-upg")
    keyed = {**AUTH, "Idempotency-Key": "first-upload"}
    assert app.test_client().post("/v1/profiles", json={"rows": rows}, headers=keyed).status_code == 201
    app.extensions["jetpredict"].storage.dispose()
    _drop_split_source(str(tmp_path / "jetpredict.sqlite"))
    return rows


def test_rows_uploaded_again_onto_a_fit_stored_before_split_source_answer_it_and_keep_it(tmp_path, take_upload_path):
    """Rows stored already, uploaded again without a key onto a fit stored without ``split_source``: the fit is
    refreshed (as reading does) before the answer is made and kept for replays, so neither that answer nor a
    retry of it says null, before or after a read refreshed the fit."""
    rows = _stale_split_source_upload(tmp_path)
    take_upload_path()
    client = sqlite_app(tmp_path).test_client()
    again = client.post("/v1/profiles", json={"rows": rows}, headers=AUTH)
    assert again.status_code == 201 and again.json["rows_stored"] == 0, again.json
    assert again.json["split_source"] == again.json["workloads"][0]["split_source"] == "components", again.json
    assert client.get("/v1/workloads/w-upg").json["split_source"] == "components"
    retry = client.post("/v1/profiles", json={"rows": rows}, headers=AUTH)
    assert retry.status_code == 201 and retry.headers[REPLAYED_HEADER] == "true", retry.json
    assert retry.json == again.json, retry.json


def test_an_upload_answer_null_where_its_schema_requires_a_value_is_not_kept_for_replays(tmp_path, monkeypatch,
                                                                                          take_upload_path):
    """Where the stale fit cannot be refreshed first (here the store does not take the refresh, as when the
    workload changed meanwhile), the answer says null once, and a retry, after a read refreshed the fit, is
    answered afresh rather than replaying the null."""
    rows = _stale_split_source_upload(tmp_path)
    take_upload_path()
    app = sqlite_app(tmp_path)
    client, storage = app.test_client(), app.extensions["jetpredict"].storage
    refresh_fit = storage.refresh_fit
    monkeypatch.setattr(storage, "refresh_fit", lambda *args: False)
    again = client.post("/v1/profiles", json={"rows": rows}, headers=AUTH)
    assert again.status_code == 201 and again.json["split_source"] is None, again.json
    monkeypatch.setattr(storage, "refresh_fit", refresh_fit)
    assert client.get("/v1/workloads/w-upg").json["split_source"] == "components"
    retry = client.post("/v1/profiles", json={"rows": rows}, headers=AUTH)
    assert retry.status_code == 201 and retry.headers[REPLAYED_HEADER] == "false", retry.json
    assert retry.json["split_source"] == retry.json["workloads"][0]["split_source"] == "components", retry.json
    assert retry.json["rows_stored"] == 0 and retry.json["revision"] == again.json["revision"] == 1


def _stored_answers(tmp_path) -> list[dict]:
    """The upload answers kept for replays (one per idempotency key), by key."""
    con = sqlite3.connect(tmp_path / "jetpredict.sqlite")
    answers = [json.loads(text) for (text,) in con.execute("SELECT response FROM idempotency ORDER BY key")]
    con.close()
    return answers


@pytest.mark.parametrize("key", ["stale-answer", None])
def test_an_answer_kept_before_split_source_was_is_answered_afresh_and_kept_anew(tmp_path, key, take_upload_path):
    """An upload of two workloads whose answer was kept (as their fits were stored) before ``split_source`` was:
    its retry, under the same key or (no key) the same rows, is answered afresh from the refreshed fits, nothing
    stored again, and the new answer is kept under the same keys, so the next retry replays it."""
    headers = {**AUTH, "Idempotency-Key": key} if key else AUTH
    rows = published_rows(as_id="w-a") + published_rows(as_id="w-b")
    app = sqlite_app(tmp_path)
    assert app.test_client().post("/v1/profiles", json={"rows": rows}, headers=headers).status_code == 201
    app.extensions["jetpredict"].storage.dispose()
    _drop_split_source(str(tmp_path / "jetpredict.sqlite"), answers=True)
    assert len(_stored_answers(tmp_path)) == 2
    take_upload_path()
    client = sqlite_app(tmp_path).test_client()
    fresh = client.post("/v1/profiles", json={"rows": rows}, headers=headers)
    assert fresh.status_code == 201 and fresh.headers[REPLAYED_HEADER] == "false", fresh.json
    entries = [(w["workload_id"], w["rows_stored"], w["revision"], w["split_source"]) for w in fresh.json["workloads"]]
    assert entries == [("w-a", 0, 1, "components"), ("w-b", 0, 1, "components")], fresh.json
    assert fresh.json["split_source"] == "components"
    kept = _stored_answers(tmp_path)
    assert len(kept) == 2 and all(a["split_source"] == "components" for a in kept), kept
    replay = client.post("/v1/profiles", json={"rows": rows}, headers=headers)
    assert replay.status_code == 201 and replay.headers[REPLAYED_HEADER] == "true", replay.json
    assert replay.json == fresh.json


def test_a_retry_that_stores_a_deleted_part_again_refreshes_the_stale_fit_of_the_part_kept(tmp_path,
                                                                                        take_upload_path):
    """Two workloads uploaded under a key, one deleted since, the other's fit and the kept answer from before
    ``split_source`` was: the retry stores the deleted part again and answers the kept part from its refreshed fit
    (before, the kept part answered null, and so nothing was kept for the next retry)."""
    headers = {**AUTH, "Idempotency-Key": "partial"}
    rows = published_rows(as_id="w-a") + published_rows(as_id="w-b")
    app = sqlite_app(tmp_path)
    client = app.test_client()
    assert client.post("/v1/profiles", json={"rows": rows}, headers=headers).status_code == 201
    assert client.delete("/v1/workloads/w-b", headers=AUTH).status_code == 204
    app.extensions["jetpredict"].storage.dispose()
    _drop_split_source(str(tmp_path / "jetpredict.sqlite"), answers=True)
    take_upload_path()
    client = sqlite_app(tmp_path).test_client()
    retry = client.post("/v1/profiles", json={"rows": rows}, headers=headers)
    assert retry.status_code == 201 and retry.headers[REPLAYED_HEADER] == "false", retry.json
    entries = [(w["workload_id"], w["rows_stored"], w["split_source"]) for w in retry.json["workloads"]]
    assert entries == [("w-a", 0, "components"), ("w-b", 4, "components")], retry.json
    again = client.post("/v1/profiles", json={"rows": rows}, headers=headers)
    assert again.headers[REPLAYED_HEADER] == "true" and again.json == retry.json, again.json


def _drop_device_split_source(storage: Storage, workload_id: str, device: str) -> None:
    """Make ``device``'s stored fit of ``workload_id`` look written before ``split_source`` was kept (the top-level
    summary too where ``device`` is the workload's first); the other devices' fits stay current. Any store."""
    table = storage_module.workloads
    with storage.engine.begin() as conn:
        row = conn.execute(sa.select(table.c.device, table.c.fit).where(table.c.id == workload_id)).one()
        fit = json.loads(row.fit if isinstance(row.fit, str) else json.dumps(row.fit))
        for entry in (fit["devices"][device], *((fit,) if device == row.device else ())):
            entry.pop("split_source")
        conn.execute(table.update().where(table.c.id == workload_id).values(fit=fit))


@pytest.mark.parametrize("key", ["other-device", None])
@pytest.mark.parametrize("stale", ["orin-nano", "nano"], ids=["first-device-stale", "second-device-stale"])
def test_new_rows_of_one_device_onto_a_stale_fit_of_the_other_answer_no_null(make_app, take_upload_path, key, stale):
    """A workload with rows of two devices, one device's stored fit from before ``split_source`` was kept, given new
    rows of its other device only (the optimistic path refits that device and leaves the stale fit stored; reads
    refresh it): no answer says null where a fresh fit states a value: the upload's, its replay, GET
    /v1/workloads/{id} and the listing (top level and each device's fit) and a prediction on each device; the
    upload's answer and each fit say what the device's prediction says. Any store."""
    from test_api_mixed_fleet import WORKLOAD, device_rows, predict, upload

    app = make_app()
    client = app.test_client()
    for device in ("orin-nano", "nano"):  # the Orin Nano is the workload's first device
        assert upload(client, device_rows(device)).status_code == 201
    _drop_device_split_source(app.extensions["jetpredict"].storage, WORKLOAD, stale)
    take_upload_path()
    client = make_app().test_client()  # a service started on the stored state (no fit cached)
    new_rows_device = "nano" if stale == "orin-nano" else "orin-nano"
    rows, headers = device_rows(new_rows_device, start=1), {"Idempotency-Key": key} if key else {}
    answer = upload(client, rows, **headers)
    assert answer.status_code == 201, answer.json
    assert (answer.json["device"], answer.json["rows_stored"], answer.json["revision"]) == (new_rows_device, 4, 3)
    detail = client.get(f"/v1/workloads/{WORKLOAD}").json
    predicted = {device: predict(client, device) for device in ("orin-nano", "nano")}
    assert all(p["rows_device"] == device for device, p in predicted.items())
    split = {device: p["split_source"] for device, p in predicted.items()}
    assert None not in split.values(), split
    seen = (answer.json["split_source"], [w["split_source"] for w in answer.json["workloads"]], detail["split_source"],
            {f["device"]: f["split_source"] for f in detail["fits"]})
    assert seen == (split[new_rows_device], [split[new_rows_device]], split["orin-nano"], split), (seen, split)
    listed = client.get("/v1/workloads").json["workloads"][0]
    assert (listed["split_source"], {f["device"]: f["split_source"] for f in listed["fits"]}) == (split["orin-nano"], split)
    replay = upload(client, rows, **headers)
    assert replay.status_code == 201 and replay.headers[REPLAYED_HEADER] == "true", replay.json
    assert replay.json == answer.json


def test_a_workload_whose_rows_fail_todays_checks_is_listed_as_not_fitted(tmp_path, monkeypatch, caplog):
    db = stored_sqlite(tmp_path)
    rows = [{**r, "epoch_time_s": -1.0} for r in published_rows()]  # refused by today's row checks
    _age_stored_fit(db, rows)
    app = sqlite_app(tmp_path)
    client = app.test_client()
    reads: list[str] = []
    storage = app.extensions["jetpredict"].storage
    load_rows = storage.load_rows
    monkeypatch.setattr(storage, "load_rows", lambda workload_id: reads.append(workload_id) or load_rows(workload_id))
    caplog.set_level(logging.WARNING, "jetpredict.api")
    tracebacks = []
    for _ in range(3):
        listed = client.get("/v1/workloads")
        assert listed.status_code == 200
        summary = listed.json["workloads"][0]
        for entry in (summary, *summary["fits"]):
            assert entry["model_version"] is None and entry["profiled_modes"] is None, entry
        refused = client.post("/v1/predictions", json=PREDICT)  # bad stored rows, named
        assert refused.status_code == 422 and "stored rows of my-resnet" in refused.json["message"], refused.json
        tracebacks.append(app.extensions["jetpredict"].workloads._stored["my-resnet"][1][0].__traceback__)
    # the refusal is remembered for the workload's revision: its rows are read and checked once, not per request,
    # and said once in the log; each request raises a new error (re-raising the cached one grew its traceback)
    assert reads == ["my-resnet"]
    assert len([r for r in caplog.records if "no longer fit" in r.getMessage()]) == 1
    assert tracebacks[0] is tracebacks[-1]


# -- 5. the database's format version -------------------------------------------------------------------
def test_a_new_database_is_stamped_and_an_older_one_adopted(tmp_path):
    db = stored_sqlite(tmp_path)
    assert sqlite_format(db) == str(FORMAT_VERSION)
    older_sqlite(db)  # as a version before the format was stored left it
    client = sqlite_app(tmp_path).test_client()
    assert client.get("/v1/workloads/my-resnet").status_code == 200
    assert sqlite_format(db) == str(FORMAT_VERSION)


def test_a_database_of_a_newer_format_is_refused(tmp_path, capsys, monkeypatch):
    from jetpredict.cli import main

    monkeypatch.delenv("JETPREDICT_DATABASE_URL", raising=False)
    monkeypatch.setenv("JETPREDICT_API_KEYS", API_KEY)
    db = stored_sqlite(tmp_path)
    con = sqlite3.connect(db)
    con.execute("UPDATE jetpredict_meta SET value = ? WHERE key = 'format'", (str(FORMAT_VERSION + 1),))
    con.commit()
    con.close()
    assert main(["serve", "--data-dir", str(tmp_path), "--port", "0", "--server", "flask"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and db in err and f"format {FORMAT_VERSION + 1}" in err and "newer" in err and "Traceback" not in err
    client = sqlite_app(tmp_path).test_client()
    for r in (client.get("/v1/workloads"), client.post("/v1/predictions", json=PREDICT),
              client.post("/v1/profiles", json={"rows": published_rows(as_id="x")}, headers=AUTH)):
        assert r.status_code == 503 and f"format {FORMAT_VERSION + 1}" in r.json["message"], r.json
    assert client.get("/healthz").status_code == 503
    assert sqlite_format(db) == str(FORMAT_VERSION + 1)  # nothing written


def test_format_is_kept_on_postgresql_too(make_app, database_url):
    app = make_app()
    storage = app.extensions["jetpredict"].storage
    with storage.engine.connect() as conn:
        found = conn.execute(sa.select(storage_module.meta.c.value)
                             .where(storage_module.meta.c.key == "format")).scalar()
    assert found == str(FORMAT_VERSION)


def test_a_full_sqlite_file_is_503_disk_full_and_loses_nothing(tmp_path):
    """SQLite's own "database or disk is full" (a page limit, as a full disk answers): 503 naming the reason,
    the upload stored nothing, the rows stored before it are intact and still served."""
    app = sqlite_app(tmp_path)
    client = app.test_client()
    assert client.post("/v1/profiles", json={"rows": published_rows()}, headers=AUTH).status_code == 201
    engine = app.extensions["jetpredict"].storage.engine
    with engine.connect() as conn:
        pages = conn.exec_driver_sql("PRAGMA page_count").scalar()
    engine.dispose()  # every connection from now on may not grow the file
    sa.event.listen(engine, "connect", lambda con, _rec: con.execute(f"PRAGMA max_page_count = {pages}"))
    rows = [{**row, "workload": f"w{i}", "source": f"published: {'x' * 400}"}
            for i in range(4) for row in published_rows()]
    r = client.post("/v1/profiles", json={"rows": rows}, headers=AUTH)
    assert r.status_code == 503 and "disk full" in r.json["message"] and r.headers["Retry-After"], r.json
    listing = client.get("/v1/workloads").json
    assert [(w["id"], w["rows_stored"]) for w in listing["workloads"]] == [("my-resnet", 4)]
    assert client.post("/v1/predictions", json=PREDICT).status_code == 200
