"""Storage: one transaction per upload (all its workloads), revision checks, the locked path, deletes."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from api_fixtures import published_rows
from jetpredict.api.storage import IdempotencyKey, RevisionConflict, Storage, WorkloadWrite, device_fits
from jetpredict.api.store_tables import workloads


@pytest.fixture
def storage(tmp_path):
    s = Storage(f"sqlite:///{tmp_path / 'db.sqlite'}")
    s.create_schema()
    yield s
    s.dispose()


def add(storage: Storage, workload_id: str, rows: list[dict], revision: int, fit: dict | None = None, **kw):
    (record,) = storage.add_uploads([WorkloadWrite(workload_id, "nano", rows, revision, fit or {})], **kw)
    return record


def test_upload_revisions_and_conflicts(storage):
    rec = add(storage, "w", [{"a": 1}, {"a": 2}], 0, {"model_version": "v"})
    assert (rec.revision, rec.rows_stored, rec.fit["model_version"]) == (1, 2, "v")
    assert device_fits(rec) == {"nano": {"rows": 2, "model_version": "v", "reference_source": None,
                                         "workload_source": None, "split_source": None, "profiled_modes": None,
                                         "has_power": None,
                                         "aliased_knobs": None, "rows_scatter_rel": None}}
    with pytest.raises(RevisionConflict):
        add(storage, "w", [{"a": 3}], 0)  # "new" workload that exists
    with pytest.raises(RevisionConflict):
        add(storage, "w", [{"a": 3}], 5)  # stale revision
    assert storage.load_rows("w") == (1, [{"a": 1}, {"a": 2}])
    rec = add(storage, "w", [{"a": 3}], 1)
    assert rec.revision == 2 and storage.load_rows("w") == (2, [{"a": 1}, {"a": 2}, {"a": 3}])
    assert storage.revision("missing") is None and storage.load_rows("missing") == (None, [])


def test_failed_upload_leaves_nothing(storage):
    add(storage, "w", [{"a": 1}], 0)
    with pytest.raises(sa.exc.StatementError):  # a row that cannot be stored fails the whole transaction
        add(storage, "w", [{"a": 2}, {"b": object()}], 1)
    assert storage.load_rows("w") == (1, [{"a": 1}])
    assert storage.get_workload_rows("w")[0].rows_stored == 1



def test_the_record_alone_is_the_record_read_with_the_rows(storage):
    """get_workload: get_workload_rows' record, None where that is (not stored, deleted, or holding no rows)."""
    add(storage, "w", [{"a": 1}, {"a": 2}], 0, {"model_version": "v"})
    assert storage.get_workload("w") == storage.get_workload_rows("w")[0] is not None
    with storage.engine.begin() as conn:  # a workload row with no rows, committed
        conn.execute(workloads.insert().values(id="bare", device="nano", revision=0, rows_stored=0, fit={},
                                               created_at="t", updated_at="t"))
    assert storage.delete_workload("w")
    assert [storage.get_workload(w) for w in ("w", "bare", "missing")] == [None] * 3
    assert [storage.get_workload_rows(w) for w in ("w", "bare")] == [(None, [])] * 2

def test_one_upload_of_several_workloads_is_one_transaction(storage):
    add(storage, "b", [{"a": 1}], 0)
    writes = [WorkloadWrite("c", "nano", [{"x": 1}], 0, {}), WorkloadWrite("b", "nano", [{"x": 2}], 1, {})]
    records = storage.add_uploads(writes, IdempotencyKey("key:k", "h"))
    assert [(r.id, r.revision, r.rows_stored) for r in records] == [("c", 1, 1), ("b", 2, 2)]
    found = storage.find_idempotent(["key:k", "key:k#1", "key:k#2"])
    assert set(found) == {"key:k", "key:k#1"}  # one key per workload: the first with the whole answer
    assert [w["workload_id"] for w in found["key:k"][1]["workloads"]] == ["c", "b"]
    assert found["key:k#1"][1]["workload_id"] == "b" and "workloads" not in found["key:k#1"][1]
    # A stale revision on the second workload: the first, new one is not stored either.
    stale = [WorkloadWrite("d", "nano", [{"x": 1}], 0, {}), WorkloadWrite("b", "nano", [{"x": 3}], 1, {})]
    with pytest.raises(RevisionConflict):
        storage.add_uploads(stale)
    assert storage.revision("d") is None and storage.load_rows("b") == (2, [{"a": 1}, {"x": 2}])
    # Deleting one workload drops its key only: the keys of the upload's other workloads stay.
    assert storage.delete_workload("c")
    assert set(storage.find_idempotent(["key:k", "key:k#1"])) == {"key:k#1"}


@pytest.mark.parametrize("locked", [False, True], ids=["optimistic", "locked"])
def test_an_id_stored_again_after_a_delete_never_reuses_a_revision(storage, locked):
    """A revision names one state of an id: a workload deleted at revision 2 and stored again starts at 3,
    on either write path, and a delete of the new one keeps the higher revision."""
    add(storage, "w", [{"a": 1}], 0)
    add(storage, "w", [{"a": 2}], 1)
    assert storage.delete_workload("w") and storage.revision("w") is None

    def store_new() -> int:
        if locked:
            (record,) = storage.add_uploads_locked(
                ["w"], "nano", lambda stored: [WorkloadWrite("w", "nano", [{"b": 1}], stored["w"][0], {})])
            return record.revision
        return add(storage, "w", [{"b": 1}], 0).revision

    assert store_new() == 3 and storage.load_rows("w") == (3, [{"b": 1}])
    assert add(storage, "w", [{"b": 2}], 3).revision == 4
    assert storage.delete_workload("w")
    assert store_new() == 5
    # Another id, never deleted, starts at 1.
    assert not storage.delete_workload("other") and add(storage, "other", [{"c": 1}], 0).revision == 1


def test_locked_upload_reads_under_the_lock(storage):
    add(storage, "w", [{"a": 1}], 0)
    seen = []

    def refit(stored):
        seen.append(stored)
        return [WorkloadWrite(k, "nano", [{"a": 2}], rev, {"model_version": "locked"}) for k, (rev, _) in
                sorted(stored.items())]

    new, old = storage.add_uploads_locked(["w", "new"], "nano", refit)
    assert seen == [{"new": (0, []), "w": (1, [{"a": 1}])}]
    assert (old.id, old.revision, old.fit["model_version"]) == ("w", 2, "locked") and new.revision == 1
    assert device_fits(old)["nano"]["rows"] == 2 and device_fits(new)["nano"]["rows"] == 1

    def refuse(stored):
        raise ValueError("cannot fit")

    with pytest.raises(ValueError):
        storage.add_uploads_locked(["w", "brand-new"], "nano", refuse)
    assert storage.load_rows("w") == (2, [{"a": 1}, {"a": 2}])
    assert storage.revision("brand-new") is None  # its placeholder went with the transaction


def test_a_part_stored_by_an_earlier_try_must_still_be_there(storage):
    add(storage, "a", [{"x": 1}], 0)
    kept = WorkloadWrite("a", "nano", [], 0, {})  # stored by an earlier try: only read for the answer
    records = storage.add_uploads([kept, WorkloadWrite("b", "nano", [{"x": 2}], 0, {})])
    assert [(r.id, r.revision, r.rows_stored) for r in records] == [("a", 1, 1), ("b", 1, 1)]
    storage.delete_workload("a")
    with pytest.raises(RevisionConflict):  # deleted since: the caller must store that part again
        storage.add_uploads([kept, WorkloadWrite("c", "nano", [{"x": 3}], 0, {})])
    assert storage.revision("c") is None


def test_a_part_deleted_before_the_locked_write_leaves_no_placeholder(storage):
    """A part stored by an earlier try (no rows) whose workload was deleted before the locks were taken: the
    placeholder that locked its id is not a stored part, so the write is a conflict and nothing commits."""
    def kept_part(stored):
        return [WorkloadWrite("gone", "nano", [], 0, {})]

    with pytest.raises(RevisionConflict):
        storage.add_uploads_locked(["gone"], "nano", kept_part, IdempotencyKey("key:k", "h"))
    assert storage.list_workloads(limit=10, offset=0) == (0, []) and storage.revision("gone") is None
    assert storage.find_idempotent(["key:k"]) == {}


def test_delete_and_listing(storage):
    for wid in ("b", "a", "c"):
        add(storage, wid, [{"x": wid}], 0)
    total, records = storage.list_workloads(limit=2, offset=1)
    assert total == 3 and [r.id for r in records] == ["b", "c"]
    assert storage.delete_workload("b") is True and storage.delete_workload("b") is False
    assert storage.load_rows("b") == (None, []) and [len(storage.load_rows(w)[1]) for w in "ac"] == [1, 1]
    # Its rows went with it: stored again, "b" holds only its new ones.
    assert storage.load_rows(add(storage, "b", [{"y": 1}], 0).id)[1] == [{"y": 1}]


def test_rows_of_several_devices_keep_one_fit_each(storage):
    """The workload's first device stays its device and its summary stays at the top; each device's fit
    and row count is kept under ``devices``."""
    add(storage, "w", [{"a": 1}, {"a": 2}], 0, {"model_version": "v", "profiled_modes": 2})
    (rec,) = storage.add_uploads([WorkloadWrite("w", "orin-nano", [{"b": 1}], 1,
                                                {"model_version": "v", "profiled_modes": 1, "has_power": True})])
    assert (rec.device, rec.devices, rec.rows_stored, rec.revision) == ("nano", ["nano", "orin-nano"], 3, 2)
    assert rec.fit["profiled_modes"] == 2  # the first device's summary, as before
    fits = device_fits(rec)
    assert (fits["nano"]["rows"], fits["orin-nano"]["rows"], fits["orin-nano"]["has_power"]) == (2, 1, True)
    (rec,) = storage.add_uploads([WorkloadWrite("w", "nano", [{"a": 3}], 2, {"model_version": "v",
                                                                              "profiled_modes": 3})])
    assert rec.fit["profiled_modes"] == 3 and device_fits(rec)["nano"]["rows"] == 3
    assert device_fits(rec)["orin-nano"]["rows"] == 1
    assert storage.load_rows("w") == (3, [{"a": 1}, {"a": 2}, {"b": 1}, {"a": 3}])


def test_a_record_of_an_older_version_reads_as_its_one_device_and_takes_others(storage):
    """A workload stored before workloads held several devices (``fit`` without ``devices``) needs no
    migration: it reads as one device and a second device's upload adds to it."""
    from jetpredict.api.storage import workloads

    add(storage, "old", [{"a": 1}], 0)
    with storage.engine.begin() as conn:  # the fit column as older versions wrote it
        conn.execute(workloads.update().where(workloads.c.id == "old").values(
            fit={"device": "nano", "model_version": "v0", "profiled_modes": 1, "has_power": False}))
    rec = storage.get_workload_rows("old")[0]
    assert rec.devices == ["nano"] and device_fits(rec)["nano"] == {
        "rows": 1, "model_version": "v0", "reference_source": None, "workload_source": None, "split_source": None,
        "profiled_modes": 1,
        "has_power": False, "aliased_knobs": None, "rows_scatter_rel": None}
    (rec,) = storage.add_uploads([WorkloadWrite("old", "xavier-nx", [{"b": 1}], 1, {"model_version": "v1"})])
    assert rec.devices == ["nano", "xavier-nx"] and rec.fit["model_version"] == "v0"
    assert device_fits(rec)["nano"]["rows"] == 1 and device_fits(rec)["xavier-nx"]["model_version"] == "v1"


def test_workload_id_columns_hold_the_longest_id():
    # Every column that stores an id takes the one width the HTTP schemas enforce.
    from jetpredict.api.schemas import MAX_WORKLOAD_ID_CHARS
    from jetpredict.api.storage import metadata

    columns = [c for table in metadata.tables.values() for c in table.columns
               if (table.name, c.name) == ("workloads", "id") or c.name == "workload_id"]
    assert len(columns) >= 4
    assert {c.type.length for c in columns} == {MAX_WORKLOAD_ID_CHARS}


def test_a_fit_of_an_older_revision_is_not_stored_over_a_newer_one(app, client, auth):
    """refresh_fit writes a fit only at the revision it was made from: a slow refit of revision 1 finishing
    after revision 2 was stored must not replace revision 2's fit (8 rows described as 4 modes)."""
    storage = app.extensions["jetpredict"].storage
    rows = published_rows(n=8)
    assert client.post("/v1/profiles", json={"rows": rows[:4]}, headers=auth).status_code == 201
    old, _ = storage.get_workload_rows("my-resnet")
    assert (old.revision, old.fit["profiled_modes"]) == (1, 4)
    assert client.post("/v1/profiles", json={"rows": rows[4:]}, headers=auth).status_code == 201
    before = client.get("/v1/workloads/my-resnet").json
    assert (before["revision"], before["rows_stored"], len(before["rows"]), before["profiled_modes"]) == (2, 8, 8, 8)
    assert storage.refresh_fit("my-resnet", 1, old.fit) is False
    assert client.get("/v1/workloads/my-resnet").json == before
    current, _ = storage.get_workload_rows("my-resnet")
    assert storage.refresh_fit("my-resnet", 2, current.fit) is True  # at its own revision it is stored


def test_a_record_read_before_a_newer_upload_keeps_its_own_fit(app, client, auth):
    """current_record refits a stale fit; if the workload changed since the record was read, the record is
    answered as read, never with the newer revision's fit (revision 1's 4 rows described as 8 modes)."""
    service = app.extensions["jetpredict"]
    rows = published_rows(n=8)
    service.storage.add_uploads([WorkloadWrite("my-resnet", rows[0]["device"], rows[:4], 0, {})])  # stale: no fit
    old = service.storage.get_workload("my-resnet")
    assert client.post("/v1/profiles", json={"rows": rows[4:]}, headers=auth).status_code == 201
    assert service.workloads.current_record(old) == old
    assert client.get("/v1/workloads/my-resnet").json["profiled_modes"] == 8  # the new revision's own fit
