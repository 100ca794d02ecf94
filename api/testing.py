"""A real ``jetpredict serve`` process on a free loopback port, for tests and benchmarks."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

STARTUP_TIMEOUT_S = 15.0  # DESIGN.md: serve answers within 15 s


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LiveServer:
    """``jetpredict serve`` in its own process group (so SIGKILL reaches the master and its workers)."""

    def __init__(self, data_dir: str | Path, api_keys: str = "test-key", workers: int = 2,
                 server: str = "auto", extra_env: dict[str, str] | None = None,
                 log_path: str | Path | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.api_keys = api_keys
        self.workers = workers
        self.server = server
        self.extra_env = dict(extra_env or {})
        self.log_path = Path(log_path) if log_path else self.data_dir / "server.log"
        self.process: subprocess.Popen | None = None

    def start(self) -> LiveServer:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "JETPREDICT_API_KEYS": self.api_keys, **self.extra_env}
        env.pop("JETPREDICT_DATABASE_URL", None)
        # Metric files live with the test's data, so a SIGKILLed server leaves nothing in /tmp.
        metrics_dir = self.data_dir / "metrics"
        metrics_dir.mkdir(exist_ok=True)
        env["PROMETHEUS_MULTIPROC_DIR"] = str(metrics_dir)
        self._log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "jetpredict", "serve", "--host", "127.0.0.1", "--port", str(self.port),
             "--workers", str(self.workers), "--data-dir", str(self.data_dir), "--server", self.server],
            env=env, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited with {self.process.returncode}; log: {self.log_path}")
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=1) as r:
                    if json.load(r)["status"] == "ok":
                        return self
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"server did not answer /healthz within {STARTUP_TIMEOUT_S} s; log: {self.log_path}")

    def kill(self) -> None:
        """SIGKILL the whole server (master and workers) at once."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            # SIGINT: gunicorn's quick shutdown (SIGTERM waits for keep-alive connections to drain).
            os.killpg(self.process.pid, signal.SIGINT)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()
        if getattr(self, "_log", None):
            self._log.close()

    def __enter__(self) -> LiveServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def mixed_load(url: str, api_key: str, rows_for, clients: int = 8, duration_s: float = 5.0,
               shared_id: str = "shared-load", predict_id: str | None = None) -> dict:
    """Uploads and predictions from ``clients`` threads for ``duration_s`` seconds; returns what was answered.

    Half the clients upload (one row per request, alternating between their own workload and one
    workload shared by all uploaders, so refits race); the other half predict 10 modes of
    ``predict_id``. ``rows_for(workload_id, i)`` gives the i-th row to upload for a workload.
    Returns ``{"requests", "errors": [(status, text)], "answered_rows": {workload_id: n}, ...}``.
    """
    import threading

    import requests

    modes = [{"cpu_cores": c, "cpu_mhz": 1190.4, "gpu_mhz": g, "emc_mhz": 1600.0}
             for c in (2, 4) for g in (318.75, 522.75, 675.75, 905.25, 1377.0)]
    stop_at = time.monotonic() + duration_s
    lock = threading.Lock()
    result: dict = {"requests": 0, "errors": [], "answered_rows": {}, "latencies_s": []}

    def note(status_ok: bool, response, workload: str | None, elapsed_s: float) -> None:
        with lock:
            result["requests"] += 1
            result["latencies_s"].append(elapsed_s)
            if not status_ok:
                result["errors"].append((response.status_code, response.text[:300]))
            elif workload is not None:
                result["answered_rows"][workload] = result["answered_rows"].get(workload, 0) + 1

    def uploader(k: int) -> None:
        session = requests.Session()
        i = 0
        while time.monotonic() < stop_at:
            workload = shared_id if i % 2 else f"load-{k}"
            t0 = time.perf_counter()
            r = session.post(url + "/v1/profiles", json={"rows": [rows_for(workload, i)]},
                             headers={"X-API-Key": api_key}, timeout=60)
            note(r.status_code == 201, r, workload, time.perf_counter() - t0)
            i += 1

    def predictor() -> None:
        session = requests.Session()
        while time.monotonic() < stop_at:
            t0 = time.perf_counter()
            r = session.post(url + "/v1/predictions", json={"workload": {"id": predict_id}, "modes": modes},
                             timeout=60)
            ok = r.status_code == 200 and len(r.json()["predictions"]) == len(modes)
            note(ok, r, None, time.perf_counter() - t0)

    threads = [threading.Thread(target=uploader if k % 2 == 0 else predictor, args=(k,) if k % 2 == 0 else ())
               for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return result
