"""Uploads of several workloads at once (``POST /v1/profiles``): grouping, one transaction, the answer,
idempotent retries across workloads, and 409 for rows that clash with what is stored. Runs on SQLite and,
with ``JETPREDICT_TEST_DATABASE_URL``, on PostgreSQL (the ``client`` fixture)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import jsonschema
import pytest
import sqlalchemy as sa
from api_fixtures import published_rows
from jetpredict.api import storage as storage_module
from jetpredict.api import upload_groups
from jetpredict.api import workloads as workloads_module

RESNET, MOBILENET = "sweep-resnet18", "sweep-mobilenetv3"
PER_WORKLOAD = ("workload_id", "rows_stored", "rows_total", "revision", "device", "model_version",
                "reference_source", "workload_source", "split_source", "profiled_modes", "has_power", "aliased_knobs",
                "rows_scatter_rel",
                "devices")


def sweep(n: int = 4, start: int = 0) -> list[dict]:
    """Rows ``start..start+n`` of both published workloads, interleaved (MobileNet's row comes first)."""
    mobilenet = published_rows("mobilenetv3-gld23k", MOBILENET, n=start + n)[start:]
    resnet = published_rows("resnet18-cifar10", RESNET, n=start + n)[start:]
    return [row for pair in zip(mobilenet, resnet, strict=True) for row in pair]


def upload(client, auth, rows: list[dict], **headers):
    return client.post("/v1/profiles", json={"rows": rows}, headers={**auth, **headers})


def rows_of(client, workload_id: str) -> int | None:
    r = client.get(f"/v1/workloads/{workload_id}")
    return len(r.json["rows"]) if r.status_code == 200 else None


def assert_conforms(client, body: dict) -> None:
    """``body`` is valid against the OpenAPI document's 201 schema of the upload (as schemathesis checks)."""
    doc = client.get("/openapi.json").json
    schema = {**doc["components"]["schemas"]["UploadResult"], "components": doc["components"]}
    jsonschema.validate(body, schema)


def test_a_sweep_of_two_workloads_is_stored_and_each_fitted(client, auth):
    r = upload(client, auth, sweep())
    assert r.status_code == 201, r.json
    body = r.json
    assert [w["workload_id"] for w in body["workloads"]] == [MOBILENET, RESNET]  # order of first row
    assert {k: body[k] for k in PER_WORKLOAD} == body["workloads"][0]  # the first workload, as before
    for entry in body["workloads"]:
        assert (entry["rows_stored"], entry["rows_total"], entry["revision"]) == (4, 4, 1)
        assert entry["device"] == "agx-xavier" and entry["profiled_modes"] == 4
        detail = client.get(f"/v1/workloads/{entry['workload_id']}").json
        assert [row["workload"] for row in detail["rows"]] == [entry["workload_id"]] * 4
        assert detail["model_version"] == entry["model_version"]
        # Modes a-d keep the CPU clock: the fit says so, in the answer and with the stored workload.
        assert entry["aliased_knobs"] == detail["aliased_knobs"] == {"cpu_mhz": "not varied"}
        ref = {"workload": {"id": entry["workload_id"]}, "modes": "presets"}
        p = client.post("/v1/predictions", json=ref)
        assert p.status_code == 200 and p.json["profiled_modes"] == 4
    assert_conforms(client, body)
    metrics = client.get("/metrics").get_data(as_text=True)
    assert 'jetpredict_workload_fits_total{kind="upload"} 2.0' in metrics  # one fit per workload
    # More rows for both: added to each, each refitted.
    r = upload(client, auth, sweep(n=2, start=4))
    assert r.status_code == 201, r.json
    assert [(w["rows_stored"], w["rows_total"], w["revision"], w["profiled_modes"], w["aliased_knobs"])
            for w in r.json["workloads"]] == [(2, 6, 2, 6, {})] * 2


def test_a_single_workload_upload_answers_as_before(client, stored):
    assert set(stored) == {*PER_WORKLOAD, "workloads"}
    assert stored["workloads"] == [{k: stored[k] for k in PER_WORKLOAD}]
    assert stored["workload_id"] == "my-resnet" and stored["rows_stored"] == 4
    assert_conforms(client, stored)


def test_one_bad_workload_stores_nothing_of_the_upload(client, auth, stored):
    rows = sweep(n=2) + published_rows(n=6)[4:]  # rows 4 and 5 add to my-resnet
    rows[5]["epoch_time_s"] = -3  # bad on its own: 422, naming the row
    r = upload(client, auth, rows)
    assert r.status_code == 422 and "rows.5.epoch_time_s" in r.json["errors"], r.json
    rows[5]["epoch_time_s"] = 600.0
    rows[5]["epoch_energy_j"] = 600.0 * rows[5]["avg_power_w"]
    rows[4] = {**rows[4], "mode": "a"}  # label "a" is stored for my-resnet with other knobs: 409
    r = upload(client, auth, rows)
    assert r.status_code == 409 and "rows.4.mode" in r.json["errors"], r.json
    assert r.json["code"] == 409 and "my-resnet" in r.json["errors"]["rows.4.mode"][0]
    assert rows_of(client, MOBILENET) is None and rows_of(client, RESNET) is None
    assert rows_of(client, "my-resnet") == 4 and client.get("/v1/workloads").json["total"] == 1


def test_the_locked_path_stores_every_workload_or_none(client, auth, stored, monkeypatch):
    monkeypatch.setattr(workloads_module, "_OPTIMISTIC_TRIES", 0)  # straight to the write locks
    clash = [{**row, "mode": "a"} for row in published_rows(n=6)[4:5]]
    r = upload(client, auth, sweep(n=2) + clash)
    assert r.status_code == 409 and "rows.4.mode" in r.json["errors"], r.json
    assert rows_of(client, MOBILENET) is None and rows_of(client, "my-resnet") == 4
    r = upload(client, auth, sweep(n=2) + published_rows(n=6)[4:])
    assert r.status_code == 201, r.json
    assert [(w["workload_id"], w["rows_total"]) for w in r.json["workloads"]] == [
        (MOBILENET, 2), (RESNET, 2), ("my-resnet", 6)]


def test_conflicts_with_stored_rows_are_409_and_bad_rows_stay_422(client, auth, stored):
    row = published_rows(n=1)[0]  # mode "a" of my-resnet, stored at 668.3 s
    slower = {"epoch_time_s": 2 * 668.3, "epoch_energy_j": 2 * row["epoch_energy_j"]}  # same power, 2x time
    r = upload(client, auth, [{**row, "mode": "a-again", **slower}])  # same knobs, 2x
    assert r.status_code == 409 and "rows.0.epoch_time_s" in r.json["errors"], r.json
    r = upload(client, auth, [{**row, "mode": "a", "cpu_cores": 8}])  # stored label, other knobs
    assert r.status_code == 409 and "rows.0.mode" in r.json["errors"], r.json
    twice = [{**row, "mode": "x"}, {**row, "mode": "x", "cpu_cores": 8}]  # contradict each other: 422
    r = upload(client, auth, twice)
    assert r.status_code == 422 and "rows.1.mode" in r.json["errors"], r.json
    assert rows_of(client, "my-resnet") == 4
    close = {"epoch_time_s": 1.1 * 668.3, "epoch_energy_j": 1.1 * row["epoch_energy_j"]}
    r = upload(client, auth, [{**row, "mode": "a-repeat", **close}])  # a close repeat
    assert r.status_code == 201 and r.json["rows_total"] == 5, r.json


def test_rows_that_fit_alone_but_not_with_the_stored_ones_are_409(app, client, auth):
    """A workload stored by an older version whose rows contradict each other (accepted before the
    conflict checks): new rows that are fine alone cannot be fitted with them."""
    from jetpredict.api.storage import WorkloadWrite
    from jetpredict.models.profile_files import rows_to_records
    from jetpredict.models.profile_rows import validate_records

    a, b = rows_to_records(validate_records(published_rows(as_id="legacy", n=2)))
    legacy = [a, {**b, "mode": a["mode"]}]  # one label, two sets of knobs
    app.extensions["jetpredict"].storage.add_uploads([WorkloadWrite("legacy", "agx-xavier", legacy, 0, {})])
    new = published_rows(as_id="legacy", n=4)[2:]
    r = upload(client, auth, sweep(n=1) + new)
    assert r.status_code == 409 and list(r.json["errors"]) == ["rows.2.workload"], r.json
    assert "2 stored rows" in r.json["message"]
    assert rows_of(client, MOBILENET) is None and rows_of(client, "legacy") == 2


def test_an_upload_of_too_many_workloads_is_422(client, auth, monkeypatch):
    monkeypatch.setattr(upload_groups, "MAX_UPLOAD_WORKLOADS", 1)  # the bound the grouping checks
    r = upload(client, auth, sweep(n=2))
    assert r.status_code == 422 and list(r.json["errors"]) == ["rows.1.workload"], r.json
    assert rows_of(client, MOBILENET) is None


def test_a_retried_sweep_is_replayed_whole(client, auth):
    first = upload(client, auth, sweep(), **{"Idempotency-Key": "sweep-1"})
    assert first.status_code == 201 and first.headers["Idempotent-Replayed"] == "false"
    again = upload(client, auth, sweep(), **{"Idempotency-Key": "sweep-1"})
    assert again.status_code == 201 and again.headers["Idempotent-Replayed"] == "true"
    assert again.json == first.json and len(again.json["workloads"]) == 2
    unkeyed = upload(client, auth, sweep(n=3))
    assert upload(client, auth, sweep(n=3)).json == unkeyed.json  # the rows' hash is the key
    # Those three rows of each were stored by the first upload: nothing new, nothing stored twice.
    assert [(w["rows_stored"], w["revision"]) for w in unkeyed.json["workloads"]] == [(0, 1), (0, 1)]
    assert rows_of(client, MOBILENET) == rows_of(client, RESNET) == 4
    r = upload(client, auth, sweep(n=2), **{"Idempotency-Key": "sweep-1"})
    assert r.status_code == 409 and "headers.Idempotency-Key" in r.json["errors"]


def test_a_twin_that_commits_first_is_replayed_and_its_answer_kept(app, client, auth, monkeypatch):
    """Two requests under one key race: the one whose write conflicts with its twin's commit replays the
    twin's answer, and the answer kept under the key is not rewritten as one that stored nothing."""
    storage = app.extensions["jetpredict"].storage
    add_uploads = storage.add_uploads

    def twin_first(writes, idem=None, replaced_keys=()):
        monkeypatch.setattr(storage, "add_uploads", add_uploads)
        add_uploads(writes, idem, replaced_keys)  # the twin, through the real store: it commits first
        return add_uploads(writes, idem, replaced_keys)

    monkeypatch.setattr(storage, "add_uploads", twin_first)
    r = upload(client, auth, sweep(), **{"Idempotency-Key": "twin"})
    assert r.status_code == 201 and r.headers["Idempotent-Replayed"] == "true", r.json
    assert [w["rows_stored"] for w in r.json["workloads"]] == [4, 4]
    assert upload(client, auth, sweep(), **{"Idempotency-Key": "twin"}).json == r.json
    assert rows_of(client, MOBILENET) == rows_of(client, RESNET) == 4


def _upload_fits(client) -> float:
    """The ``jetpredict_workload_fits_total{kind="upload"}`` counter."""
    line = next(line for line in client.get("/metrics").get_data(as_text=True).splitlines()
                if line.startswith('jetpredict_workload_fits_total{kind="upload"}'))
    return float(line.rsplit(" ", 1)[1])


def test_the_fit_metric_counts_only_uploads_that_stored_rows(client, auth):
    """A replayed upload and an upload whose rows are all stored already fit nothing."""
    first = upload(client, auth, published_rows(), **{"Idempotency-Key": "k1"})
    assert first.status_code == 201 and _upload_fits(client) == 1.0
    replay = upload(client, auth, published_rows(), **{"Idempotency-Key": "k1"})
    assert replay.headers["Idempotent-Replayed"] == "true" and _upload_fits(client) == 1.0
    nothing_new = upload(client, auth, published_rows(), **{"Idempotency-Key": "k2"})
    assert nothing_new.status_code == 201 and nothing_new.json["rows_stored"] == 0
    assert nothing_new.headers["Idempotent-Replayed"] == "false" and _upload_fits(client) == 1.0


def test_a_bad_workload_id_is_named_at_its_first_row(client, auth):
    bad = [{**row, "workload": "bad\\id"} for row in published_rows()]
    r = upload(client, auth, published_rows() + bad)  # the bad id's rows are 4 to 7
    assert r.status_code == 422 and set(r.json["errors"]) == {"rows.4.workload"}, r.json
    assert client.get("/v1/workloads").json["total"] == 0  # nothing stored


@pytest.mark.parametrize("deleted", [MOBILENET, RESNET], ids=["first", "second"])
def test_a_retry_after_a_delete_stores_only_what_was_deleted(client, auth, deleted):
    first = upload(client, auth, sweep())
    assert first.status_code == 201
    assert client.delete(f"/v1/workloads/{deleted}", headers=auth).status_code == 204
    retry = upload(client, auth, sweep())  # must not claim the deleted rows are stored, nor double the others
    assert retry.status_code == 201 and retry.headers["Idempotent-Replayed"] == "false", retry.json
    assert rows_of(client, MOBILENET) == rows_of(client, RESNET) == 4
    stored_now = {w["workload_id"]: w["rows_stored"] for w in retry.json["workloads"]}
    kept = RESNET if deleted == MOBILENET else MOBILENET
    assert stored_now == {deleted: 4, kept: 0}
    assert_conforms(client, retry.json)
    again = upload(client, auth, sweep())
    assert again.headers["Idempotent-Replayed"] == "true" and again.json == retry.json
    assert rows_of(client, MOBILENET) == rows_of(client, RESNET) == 4


def test_a_retry_after_deleting_a_single_workload_stores_it_again(client, auth, stored):
    assert client.delete("/v1/workloads/my-resnet", headers=auth).status_code == 204
    r = upload(client, auth, published_rows())
    # Stored again, under a revision the deleted workload never had (it was at 1).
    assert r.status_code == 201 and r.headers["Idempotent-Replayed"] == "false" and r.json["revision"] == 2
    assert rows_of(client, "my-resnet") == 4


def test_a_workload_uploaded_again_after_a_delete_is_never_answered_from_the_deleted_rows(make_app, auth):
    """Two workers of one service: one caches the workload's model, the other deletes it and stores other
    rows under the same id. The first answers from the new rows (its cache is checked by revision)."""
    first, second = make_app().test_client(), make_app().test_client()
    body = {"workload": {"id": "my-resnet"}, "modes": "presets"}
    rows = published_rows()
    assert upload(second, auth, rows).json["revision"] == 1
    before = first.post("/v1/predictions", json=body).json["predictions"]
    assert second.delete("/v1/workloads/my-resnet", headers=auth).status_code == 204
    slower = [{**r, "epoch_time_s": 3 * r["epoch_time_s"], "epoch_energy_j": 3 * r["epoch_energy_j"]} for r in rows]
    again = upload(second, auth, slower)
    assert again.status_code == 201 and again.json["revision"] == 2
    after = first.post("/v1/predictions", json=body).json["predictions"]
    assert after == second.post("/v1/predictions", json=body).json["predictions"]
    assert all(a["epoch_time_s"] > 2 * b["epoch_time_s"] for a, b in zip(after, before, strict=True))
    # Each later upload counts on from there, on either worker.
    assert upload(first, auth, published_rows(n=6)[4:]).json["revision"] == 3



def _lock_wait_probe(observer, storage, thread: threading.Thread) -> Callable[[], bool]:
    """Whether ``thread``, writing through ``storage``, waits now on a lock another transaction holds.
    PostgreSQL says so (``pg_stat_activity``, read through ``observer``: this test's only other writer is
    paused in Python, so any waiter is ``thread``). SQLite has one write lock, taken by the ``BEGIN
    IMMEDIATE`` that starts every write (:func:`api.sqlite_setup.begin`): ``thread`` in that statement while
    another write transaction is open waits for it to end."""
    beginning: set[int] = set()

    def before(conn, cursor, statement, *args) -> None:
        if statement == "BEGIN IMMEDIATE":
            beginning.add(threading.get_ident())

    def after(conn, cursor, statement, *args) -> None:
        beginning.discard(threading.get_ident())

    sa.event.listen(storage.engine, "before_cursor_execute", before)
    sa.event.listen(storage.engine, "after_cursor_execute", after)

    def waits() -> bool:
        if not storage.is_postgresql:
            return thread.ident in beginning
        with observer.engine.connect() as conn:
            return bool(conn.execute(sa.text("SELECT count(*) FROM pg_stat_activity WHERE datname = "
                                             "current_database() AND wait_event_type = 'Lock'")).scalar())

    return waits


def test_an_upload_racing_a_delete_never_reuses_a_revision(make_app, auth, monkeypatch):
    """Worker 1 stores a deleted id again. Just as its upload reads the id's last deleted revision, worker 2
    stores other rows under the id, caches their model and deletes them (the interleaving seen live). The
    two uploads must not share a revision: worker 2 would keep answering from its cached model of the
    deleted rows, since caches are checked by revision alone."""
    first_app, second_app = make_app(), make_app()
    first, second = first_app.test_client(), second_app.test_client()
    body = {"workload": {"id": "my-resnet"}, "modes": "presets"}
    rows, others = published_rows(), published_rows(n=8)[4:]
    assert upload(first, auth, rows).json["revision"] == 1
    assert first.delete("/v1/workloads/my-resnet", headers=auth).status_code == 204
    read = storage_module._last_deleted_revision
    answers: dict[str, dict] = {}

    def worker_2() -> None:
        answers["b"] = upload(second, auth, others).json
        second.post("/v1/predictions", json=body)  # caches the model of its rows
        second.delete("/v1/workloads/my-resnet", headers=auth)

    other = threading.Thread(target=worker_2)
    waits_on_a_lock = _lock_wait_probe(first_app.extensions["jetpredict"].storage,
                                       second_app.extensions["jetpredict"].storage, other)

    def interleaved(conn, workload_id: str) -> int:
        value = read(conn, workload_id)
        if threading.current_thread().name == "A" and other.ident is None:  # worker 1's first read only
            other.start()
            # Until worker 2 finishes, or waits on a lock this paused upload holds (as it does): it cannot go
            # on before this upload ends then, so waiting longer (this once waited 3 s) changes nothing.
            deadline = time.monotonic() + 30
            while other.is_alive() and not waits_on_a_lock() and time.monotonic() < deadline:
                time.sleep(0.005)
        return value

    monkeypatch.setattr(storage_module, "_last_deleted_revision", interleaved)
    a = threading.Thread(name="A", target=lambda: answers.update(a=upload(first, auth, rows).json))
    a.start()
    a.join(timeout=60)
    other.join(timeout=60)
    monkeypatch.setattr(storage_module, "_last_deleted_revision", read)
    seen = [answers["a"].get("revision"), answers["b"].get("revision")]
    assert seen[0] != seen[1], answers
    fresh = make_app().test_client()
    assert second.post("/v1/predictions", json=body).json == fresh.post("/v1/predictions", json=body).json
    later = upload(first, auth, published_rows(n=10)[8:])
    assert later.status_code == 201 and later.json["revision"] > max(r for r in seen if r is not None)
    assert second.post("/v1/predictions", json=body).json == fresh.post("/v1/predictions", json=body).json


@pytest.mark.slow
def test_sweeps_in_opposite_orders_at_once_all_land(make_app, auth, take_upload_path):
    """Two clients upload both workloads at once, in opposite orders, on each upload path: no deadlock, no lost
    upload."""
    take_upload_path()
    apps = [make_app(), make_app()]
    batches = [sweep(n=1, start=i) for i in range(6)]
    statuses: list[int] = []

    def run(app, mine: list[list[dict]]) -> None:
        client = app.test_client()
        statuses.extend(upload(client, auth, rows).status_code for rows in mine)

    threads = [threading.Thread(target=run, args=(apps[0], batches[0::2])),
               threading.Thread(target=run, args=(apps[1], [b[::-1] for b in batches[1::2]]))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert statuses == [201] * 6
    client = apps[0].test_client()
    assert rows_of(client, MOBILENET) == rows_of(client, RESNET) == 6


def test_rows_stored_under_earlier_rules_stay_usable_after_an_upgrade(client, auth, monkeypatch):
    """A service before the rules inside a row (stall + compute at most the epoch, energy = power x time)
    stored such rows; after the upgrade the workload still predicts and takes more rows, which the new
    rules check."""
    from jetpredict.models import profile_rows

    rows = published_rows("resnet18-cifar10", "legacy", n=5)
    old = [dict(r) for r in rows[:4]]
    old[0]["stall_time_s"] = old[0]["compute_time_s"] = 0.6 * old[0]["epoch_time_s"]
    old[1]["epoch_energy_j"] *= 1.5
    with monkeypatch.context() as m:  # the service before the rules
        m.setattr(profile_rows, "part_problems", lambda row: {})
        assert upload(client, auth, old).status_code == 201
    r = client.post("/v1/predictions", json={"workload": {"id": "legacy"}, "modes": "presets"})
    assert r.status_code == 200, r.json
    cross = client.post("/v1/predictions", json={"workload": {"id": "legacy"}, "modes": "presets", "device": "nano"})
    assert cross.status_code == 200, cross.json
    assert upload(client, auth, rows[4:]).status_code == 201 and rows_of(client, "legacy") == 5
    bad = {**rows[4], "mode": "x", "cpu_cores": 2, "epoch_energy_j": 3 * rows[4]["epoch_energy_j"]}
    r = upload(client, auth, [bad])
    assert r.status_code == 422 and "rows.0.epoch_energy_j" in r.json["errors"], r.json


def test_rows_with_a_batch_size_of_0_are_refused_naming_the_field(client, auth):
    rows = published_rows(n=4)
    rows[0]["batch_size"] = 0
    r = upload(client, auth, rows)
    assert r.status_code == 422 and list(r.json["errors"]) == ["rows.0.batch_size"], r.json
    assert r.json["errors"]["rows.0.batch_size"] == ["must be >= 1 count, got 0"]
    assert rows_of(client, "my-resnet") is None
    doc = client.get("/openapi.json").json
    assert doc["components"]["schemas"]["ProfileRow.agx-xavier"]["properties"]["batch_size"]["minimum"] == 1


def test_a_fit_refused_in_one_workload_is_422_over_a_conflict_in_another(client, auth, stored):
    """Across the workloads of one upload, a 422 (bad rows: the client must fix them) wins over a 409 (a
    clash with stored rows), whichever comes first."""
    from jetpredict.models.profile_rows import MIN_S_PER_MINIBATCH
    from jetpredict.predictor.terms import MIN_EPOCH_TIME_S

    tiny_s = MIN_EPOCH_TIME_S / 2  # row checks pass (one minibatch of it is plausible); the fit refuses it
    assert tiny_s >= MIN_S_PER_MINIBATCH
    row = published_rows(n=1)[0]
    unmeasured = dict.fromkeys(("stall_time_s", "compute_time_s", "epoch_energy_j", "avg_power_w", "base_power_w"))
    tiny = {**row, **unmeasured, "workload": "tiny", "epoch_time_s": tiny_s, "minibatches_per_epoch": 1}
    clash = {**published_rows(n=6)[5], "mode": "a"}  # my-resnet's stored label "a", with other knobs
    assert upload(client, auth, [clash]).status_code == 409
    for rows in ([tiny, clash], [clash, tiny]):
        r = upload(client, auth, rows)
        assert r.status_code == 422 and list(r.json["errors"]) == ["rows.epoch_time_s"], r.json
        assert "workload 'tiny'" in r.json["message"] and f"{MIN_EPOCH_TIME_S:g}.." in r.json["message"]
    assert rows_of(client, "tiny") is None and rows_of(client, "my-resnet") == 4


def test_rows_stored_already_but_sent_with_blank_cells_are_not_stored_again(client, auth):
    """A blank or empty pass-through cell is no value: those rows are the stored ones, and only the new row is kept."""
    assert upload(client, auth, published_rows(n=3), **{"Idempotency-Key": "k1"}).status_code == 201
    again = [{**row, "power_meter": " ", "power_null_reason": None} for row in published_rows(n=4)]
    r = upload(client, auth, again, **{"Idempotency-Key": "k2"})
    assert r.status_code == 201 and (r.json["rows_stored"], r.json["rows_total"]) == (1, 4), r.json


def test_deleting_an_id_not_stored_is_404_and_leaves_the_others(client, auth):
    assert upload(client, auth, sweep()).status_code == 201
    r = client.delete("/v1/workloads/never-stored", headers=auth)
    assert r.status_code == 404 and "never-stored" in r.json["message"], r.json
    assert client.delete(f"/v1/workloads/{RESNET}", headers=auth).status_code == 204
    assert (rows_of(client, RESNET), rows_of(client, MOBILENET)) == (None, 4)
