"""A real ``jetpredict serve`` process: SIGKILL during uploads, and concurrent clients (short form)."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest
import requests
from api_fixtures import published_rows
from jetpredict.api.app import create_app
from jetpredict.api.config import load_settings
from jetpredict.api.storage import Storage

from tools.testing import LiveServer, mixed_load

pytestmark = pytest.mark.slow  # starts processes or servers (see README: the fast pass)

KEY = "live-key"


def _row(workload: str, i: int) -> dict:
    rows = published_rows(as_id=workload, n=10)
    return rows[i % len(rows)]


def _assert_consistent(storage: Storage) -> dict[str, int]:
    """Every stored workload's rows match its uploads exactly (no half-written upload)."""
    import sqlalchemy as sa
    from jetpredict.api.storage import profile_rows, uploads, workloads

    with storage.engine.connect() as conn:
        assert conn.execute(sa.text("PRAGMA integrity_check")).scalar() == "ok"
        stored = {w.id: w for w in conn.execute(sa.select(workloads))}
        for wid, w in stored.items():
            n_rows = conn.execute(sa.select(sa.func.count()).where(profile_rows.c.workload_id == wid)).scalar()
            ups = conn.execute(sa.select(uploads.c.rows, uploads.c.revision).where(uploads.c.workload_id == wid)
                               .order_by(uploads.c.revision)).all()
            assert n_rows == w.rows_stored == sum(u.rows for u in ups), wid
            assert [u.revision for u in ups] == list(range(1, w.revision + 1)), wid
            orphans = conn.execute(sa.select(sa.func.count()).select_from(profile_rows).where(
                profile_rows.c.upload_id.not_in(sa.select(uploads.c.id)))).scalar()
            assert orphans == 0
    return {wid: w.rows_stored for wid, w in stored.items()}


@pytest.mark.timeout(120)
def test_sigkill_during_uploads_loses_no_answered_upload(tmp_path):
    server = LiveServer(tmp_path / "data", api_keys=KEY, workers=2).start()
    answered: list[tuple[str, int]] = []  # (workload id, rows) of every upload answered 201
    unexpected: list[str] = []
    stop = threading.Event()

    def upload_stream(k: int) -> None:
        session = requests.Session()
        i = 0
        while not stop.is_set():
            workload = "appended" if i % 2 else f"new-{i}"
            # Rows differ per stream and upload: identical rows are one upload (the content-hash idempotency
            # key), and a stream wraps around the 10 published rows after 10 uploads.
            rows = [{**r, "epoch_time_s": float(r["epoch_time_s"]) * (1 + 1e-4 * (k + 1) + 1e-6 * i)}
                    for r in (_row(workload, i), _row(workload, i + 1))]
            try:
                r = session.post(server.url + "/v1/profiles", json={"rows": rows},
                                 headers={"X-API-Key": KEY}, timeout=10)
            except requests.RequestException:
                return  # the server is gone
            if r.status_code != 201:
                unexpected.append(f"{r.status_code}: {r.text[:200]}")
                return
            answered.append((workload, len(rows)))
            i += 1

    threads = [threading.Thread(target=upload_stream, args=(k,)) for k in range(2)]
    try:
        for t in threads:
            t.start()
        # Until 12 uploads are answered, however long that takes (the timeout mark catches a hang); a stream
        # that stopped (an unexpected answer, the server gone) ends the wait, and the asserts below say why.
        while len(answered) < 12 and not unexpected and any(t.is_alive() for t in threads):
            time.sleep(0.02)
        server.kill()  # SIGKILL to master and workers, mid-stream
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
        server.stop()
    assert unexpected == [] and len(answered) >= 12

    storage = Storage(load_settings({"DATA_DIR": tmp_path / "data"}).database_url)
    stored = _assert_consistent(storage)
    expected: dict[str, int] = {}
    for workload, n in answered:
        expected[workload] = expected.get(workload, 0) + n
    for workload, n in expected.items():
        # At most the one upload per stream that was committed but not yet answered can be extra.
        assert n <= stored.get(workload, 0) <= n + 2 * len(threads), workload
    storage.dispose()

    # The service restarted on the same data predicts from the surviving rows.
    again = create_app({"DATA_DIR": tmp_path / "data", "API_KEYS": KEY}).test_client()
    r = again.post("/v1/predictions", json={"workload": {"id": "appended"}})
    assert r.status_code == 200 and r.json["profiled_modes"] >= 1


@pytest.mark.timeout(120)
def test_concurrent_uploads_and_predictions(tmp_path):
    with LiveServer(tmp_path / "data", api_keys=KEY, workers=2) as server:
        r = requests.post(server.url + "/v1/profiles", json={"rows": published_rows(as_id="target")},
                          headers={"X-API-Key": KEY}, timeout=30)
        assert r.status_code == 201
        result = mixed_load(server.url, KEY, _row, clients=8, duration_s=3.0, predict_id="target")
        assert result["errors"] == []
        assert result["requests"] > 8
        listing = requests.get(server.url + "/v1/workloads?limit=1000", timeout=10).json()
    stored = {w["id"]: w["rows_stored"] for w in listing["workloads"]}
    for workload, n in result["answered_rows"].items():
        assert stored[workload] == n, workload  # every answered row stored, none twice
    storage = Storage(load_settings({"DATA_DIR": tmp_path / "data"}).database_url)
    _assert_consistent(storage)
    storage.dispose()


@pytest.mark.timeout(60)
def test_serve_with_flask_server_and_generated_key(tmp_path):
    """`serve --server flask` on the defaults: without JETPREDICT_API_KEYS it prints a key that works."""
    import re

    with LiveServer(tmp_path / "data", api_keys="", workers=1, server="flask") as server:
        log = server.log_path.read_text()
        assert "Flask server" in log
        key = re.search(r"X-API-Key: (\S+)", log).group(1)
        rows = {"rows": published_rows(as_id="flask-served")}
        r = requests.post(server.url + "/v1/profiles", json=rows, headers={"X-API-Key": "wrong"}, timeout=30)
        assert r.status_code == 403
        r = requests.post(server.url + "/v1/profiles", json=rows, headers={"X-API-Key": key}, timeout=30)
        assert r.status_code == 201, r.text
        assert requests.get(server.url + "/healthz", timeout=10).json()["status"] == "ok"
        # One line per request, the access log's: the development server adds none of its own.
        lines = server.log_path.read_text().splitlines()
        assert sum('"POST /v1/profiles"' in line for line in lines) == 2
        assert not any("HTTP/1.1" in line for line in lines)


def _children(pid: int) -> set[int]:
    """The pids whose parent is ``pid`` (gunicorn's workers under its master)."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # the process ended while read
            continue
        if int(fields[1]) == pid:
            found.add(int(stat.parent.name))
    return found


def _workers(master: int, n: int, replacing: set[int] = frozenset(), timeout_s: float = 60.0) -> set[int]:
    """Waits until ``master`` has ``n`` workers, none of them in ``replacing``; returns their pids."""
    deadline = time.monotonic() + timeout_s
    while not (len(now := _children(master)) == n and not now & replacing):
        assert time.monotonic() < deadline, f"not {n} workers other than {set(replacing)}: {now}"
        time.sleep(0.2)
    return now


@pytest.mark.timeout(120)
def test_workers_that_replace_exited_ones_answer_with_the_metric_folder_serve_made(tmp_path):
    """``serve`` makes a metric folder for its gunicorn workers when PROMETHEUS_MULTIPROC_DIR is unset. A worker
    that exits normally (gunicorn's SIGHUP replaces every worker) must leave it: before, the first exit deleted it
    and every later worker answered 500, /healthz included."""
    with LiveServer(tmp_path / "data", api_keys=KEY, workers=2, server="gunicorn", own_metrics_dir=False) as server:
        first = _workers(server.process.pid, 2)
        os.kill(server.process.pid, signal.SIGHUP)
        _workers(server.process.pid, 2, replacing=first)
        for _ in range(6):  # each request on a fresh connection: both new workers answer some
            assert requests.get(server.url + "/healthz", timeout=10).status_code == 200
            assert requests.get(server.url + "/metrics", timeout=10).status_code == 200
        r = requests.post(server.url + "/v1/profiles", json={"rows": published_rows(as_id="after-hup")},
                          headers={"X-API-Key": KEY}, timeout=30)
        assert r.status_code == 201, r.text
