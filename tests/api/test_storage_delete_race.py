"""A delete racing the first upload of the same workload id, forced on PostgreSQL (READ COMMITTED: each
statement of the delete sees what committed before it). SQLite's write lock serialises the two, so the
interleaving cannot happen there (its sequential behaviour: ``test_api_storage``)."""

from __future__ import annotations

import threading

import pytest
import sqlalchemy as sa
from jetpredict.api.storage import Storage, WorkloadWrite, profile_rows, workloads

WID = "race-demo"
PAUSE_S = 10.0  # the longest either side waits for the other (a bound, not a timing the test relies on)


def _upload(storage: Storage, epoch_time_s: float) -> int:
    (record,) = storage.add_uploads([WorkloadWrite(WID, "nano", [{"epoch_time_s": epoch_time_s}], 0, {})])
    return record.revision


def test_a_delete_racing_a_first_upload_never_lets_the_id_reuse_a_revision(database_url):
    """The upload holds its uncommitted placeholder while the delete looks for the workload (none yet), then
    commits before the delete's first DELETE statement. Either the delete removes the whole upload (and the
    next upload of the id gets a new revision) or it finds nothing and the upload stays whole; never rows
    deleted while the id's deleted revision stays behind them."""
    if not database_url:
        pytest.skip("SQLite's write lock serialises a delete and an upload: no interleaving to force")
    storage = Storage(database_url)
    storage.create_schema()
    try:
        deleted_at = _upload(storage, 1.0)
        assert storage.delete_workload(WID)
        placeholder_in, delete_went_on, upload_done = threading.Event(), threading.Event(), threading.Event()

        def after(conn, cursor, statement, params, context, executemany) -> None:
            if threading.current_thread().name == "U" and statement.startswith("INSERT INTO workloads"):
                placeholder_in.set()
                delete_went_on.wait(PAUSE_S)  # uncommitted until the delete has looked for the workload

        def before(conn, cursor, statement, params, context, executemany) -> None:
            if threading.current_thread().name == "D" and statement.startswith("DELETE"):
                delete_went_on.set()
                upload_done.wait(PAUSE_S)  # the upload commits before the delete deletes anything

        answers: dict[str, object] = {}

        def upload() -> None:
            try:
                answers["upload"] = _upload(storage, 2.0)
            finally:
                upload_done.set()

        def delete() -> None:
            placeholder_in.wait(PAUSE_S)
            try:
                answers["delete"] = storage.delete_workload(WID)
            finally:
                delete_went_on.set()

        sa.event.listen(storage.engine, "after_cursor_execute", after)
        sa.event.listen(storage.engine, "before_cursor_execute", before)
        try:
            threads = [threading.Thread(target=upload, name="U"), threading.Thread(target=delete, name="D")]
            for t in threads:
                t.start()
            for t in threads:
                t.join(3 * PAUSE_S)
        finally:
            sa.event.remove(storage.engine, "after_cursor_execute", after)
            sa.event.remove(storage.engine, "before_cursor_execute", before)
        raced = answers["upload"]
        assert raced == deleted_at + 1, answers
        if answers["delete"]:
            assert storage.load_rows(WID) == (None, [])
        else:  # the delete came first (nothing stored then): the upload is intact
            assert storage.load_rows(WID) == (raced, [{"epoch_time_s": 2.0}])
            assert storage.delete_workload(WID)
        with storage.engine.connect() as conn:  # no rows outlive their workload
            orphans = conn.execute(sa.select(sa.func.count()).select_from(profile_rows).where(
                profile_rows.c.workload_id.not_in(sa.select(workloads.c.id)))).scalar_one()
        assert orphans == 0
        assert _upload(storage, 3.0) > raced  # a revision names one state of the id, never two
    finally:
        storage.dispose()
