"""Storage: one transaction per upload, revision checks, the locked path, deletes."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from jetpredict.api.storage import RevisionConflict, Storage


@pytest.fixture
def storage(tmp_path):
    s = Storage(f"sqlite:///{tmp_path / 'db.sqlite'}")
    s.create_schema()
    yield s
    s.dispose()


def test_upload_revisions_and_conflicts(storage):
    rec = storage.add_upload("w", "nano", [{"a": 1}, {"a": 2}], 0, {"model_version": "v"})
    assert (rec.revision, rec.rows_stored, rec.fit) == (1, 2, {"model_version": "v"})
    with pytest.raises(RevisionConflict):
        storage.add_upload("w", "nano", [{"a": 3}], 0, {})  # "new" workload that exists
    with pytest.raises(RevisionConflict):
        storage.add_upload("w", "nano", [{"a": 3}], 5, {})  # stale revision
    assert storage.revision("w") == 1 and storage.count_rows("w") == 2
    rec = storage.add_upload("w", "nano", [{"a": 3}], 1, {})
    assert rec.revision == 2 and storage.load_rows("w") == (2, [{"a": 1}, {"a": 2}, {"a": 3}])
    assert storage.revision("missing") is None and storage.load_rows("missing") == (None, [])


def test_failed_upload_leaves_nothing(storage):
    storage.add_upload("w", "nano", [{"a": 1}], 0, {})
    with pytest.raises(sa.exc.StatementError):  # a row that cannot be stored fails the whole transaction
        storage.add_upload("w", "nano", [{"a": 2}, {"b": object()}], 1, {})
    assert storage.load_rows("w") == (1, [{"a": 1}])
    assert storage.get_workload("w").rows_stored == 1


def test_locked_upload_reads_under_the_lock(storage):
    storage.add_upload("w", "nano", [{"a": 1}], 0, {})
    seen = []

    def refit(stored):
        seen.append(list(stored))
        return {"model_version": "locked"}

    rec = storage.add_upload_locked("w", "nano", [{"a": 2}], refit)
    assert seen == [[{"a": 1}]] and rec.revision == 2 and rec.fit == {"model_version": "locked"}

    def refuse(stored):
        raise ValueError("cannot fit")

    with pytest.raises(ValueError):
        storage.add_upload_locked("w", "nano", [{"a": 3}], refuse)
    assert storage.load_rows("w")[0] == 2 and storage.count_rows("w") == 2
    rec = storage.add_upload_locked("new", "nano", [{"a": 1}], refit)
    assert rec.revision == 1


def test_delete_and_listing(storage):
    for wid in ("b", "a", "c"):
        storage.add_upload(wid, "nano", [{"x": wid}], 0, {})
    total, records = storage.list_workloads(limit=2, offset=1)
    assert total == 3 and [r.id for r in records] == ["b", "c"]
    assert storage.delete_workload("b") is True and storage.delete_workload("b") is False
    assert storage.count_rows() == 2 and storage.revision("b") is None
