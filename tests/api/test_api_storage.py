"""Storage: one transaction per upload (all its workloads), revision checks, the locked path, deletes."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from jetpredict.api.storage import IdempotencyKey, RevisionConflict, Storage, WorkloadWrite


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
    assert (rec.revision, rec.rows_stored, rec.fit) == (1, 2, {"model_version": "v"})
    with pytest.raises(RevisionConflict):
        add(storage, "w", [{"a": 3}], 0)  # "new" workload that exists
    with pytest.raises(RevisionConflict):
        add(storage, "w", [{"a": 3}], 5)  # stale revision
    assert storage.revision("w") == 1 and storage.count_rows("w") == 2
    rec = add(storage, "w", [{"a": 3}], 1)
    assert rec.revision == 2 and storage.load_rows("w") == (2, [{"a": 1}, {"a": 2}, {"a": 3}])
    assert storage.revision("missing") is None and storage.load_rows("missing") == (None, [])


def test_failed_upload_leaves_nothing(storage):
    add(storage, "w", [{"a": 1}], 0)
    with pytest.raises(sa.exc.StatementError):  # a row that cannot be stored fails the whole transaction
        add(storage, "w", [{"a": 2}, {"b": object()}], 1)
    assert storage.load_rows("w") == (1, [{"a": 1}])
    assert storage.get_workload("w").rows_stored == 1


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
    assert storage.revision("d") is None and storage.count_rows("b") == 2
    # Deleting one workload drops its key only: the keys of the upload's other workloads stay.
    assert storage.delete_workload("c")
    assert set(storage.find_idempotent(["key:k", "key:k#1"])) == {"key:k#1"}


def test_locked_upload_reads_under_the_lock(storage):
    add(storage, "w", [{"a": 1}], 0)
    seen = []

    def refit(stored):
        seen.append(stored)
        return [WorkloadWrite(k, "nano", [{"a": 2}], rev, {"model_version": "locked"}) for k, (rev, _) in
                sorted(stored.items())]

    new, old = storage.add_uploads_locked(["w", "new"], "nano", refit)
    assert seen == [{"new": (0, []), "w": (1, [{"a": 1}])}]
    assert (old.id, old.revision, old.fit) == ("w", 2, {"model_version": "locked"}) and new.revision == 1

    def refuse(stored):
        raise ValueError("cannot fit")

    with pytest.raises(ValueError):
        storage.add_uploads_locked(["w", "brand-new"], "nano", refuse)
    assert storage.load_rows("w")[0] == 2 and storage.count_rows("w") == 2
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


def test_delete_and_listing(storage):
    for wid in ("b", "a", "c"):
        add(storage, wid, [{"x": wid}], 0)
    total, records = storage.list_workloads(limit=2, offset=1)
    assert total == 3 and [r.id for r in records] == ["b", "c"]
    assert storage.delete_workload("b") is True and storage.delete_workload("b") is False
    assert storage.count_rows() == 2 and storage.revision("b") is None
