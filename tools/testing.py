"""A real ``jetpredict serve`` process on a free loopback port, and published profile rows as a JSON client
sends them, for tests and benchmarks.

Scaffolding of the repository, not of the package: it is not installed, and it uses dev-only packages
(``requests`` in :func:`mixed_load`). Tests import it as ``tools.testing`` (pytest puts the repository root
on ``sys.path``); benches add the root themselves.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

#: How long a started server may take to answer /healthz (s): a liveness guard, not a speed check (a server that
#: exits fails at once; bench/api_boots.py measures boots). Cold page caches took 13 s on the 2-core machine.
STARTUP_TIMEOUT_S = 60.0


def wait_until(condition: Callable[[], object], timeout_s: float, failure: str | Callable[[], str],
               poll_s: float = 0.01) -> None:
    """Poll ``condition`` every ``poll_s`` s until it is true. Past ``timeout_s`` s, an AssertionError saying
    ``failure`` (a callable gives its words at that moment): a bound for a hung part, not a speed check."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, failure if isinstance(failure, str) else failure()
        time.sleep(poll_s)


def published_rows(workload: str = "resnet18-cifar10", as_id: str = "my-resnet", n: int = 4) -> list[dict]:
    """``n`` published AGX Xavier rows of ``workload``, relabelled as the new workload ``as_id``, as a JSON
    client sends them (:func:`json_row`)."""
    from jetpredict.models.paths import data_path

    with (data_path("reference") / "agx-xavier-published.csv").open(newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["workload"] == workload]
    return [{**json_row(r), "workload": as_id} for r in rows[:n]]


#: The model version of the stored fits that :func:`age_stored_fits` writes (the service's first model).
OLD_MODEL_VERSION = "mech-1"


def age_stored_fits(db: str | Path, **fields: object) -> None:
    """Make every workload's stored fit in the SQLite file ``db`` look written by an older model
    (:data:`OLD_MODEL_VERSION`), each device's entry too, with ``fields`` set on them as well."""
    import sqlite3

    con = sqlite3.connect(db)
    try:
        with con:
            for workload_id, text in con.execute("SELECT id, fit FROM workloads").fetchall():
                fit = json.loads(text)
                for entry in (fit, *fit["devices"].values()):
                    entry.update(model_version=OLD_MODEL_VERSION, **fields)
                con.execute("UPDATE workloads SET fit = ? WHERE id = ?", (json.dumps(fit), workload_id))
    finally:
        con.close()


#: Ten modes the adaptive loop profiled for twin ResNet-18 min-energy on Orin Nano (README's whole-space run),
#: labelled as ``profile --modes`` takes them: memory-bound at EMC 204 and 665.6 MHz as the model's kernel mix
#: is not, so a fit of their rows misses its own rows (tests of ``rows_scatter_rel`` and fit_check).
TWIN_ORIN_NANO_MODES = ("2c-806.4-625-665.6", "6c-1510.4-408-2133", "1c-115.2-306-2133", "1c-1510.4-306-204",
                        "5c-499.2-306-665.6", "6c-499.2-306-665.6", "5c-576-306-665.6", "6c-576-306-665.6",
                        "5c-652.8-306-665.6", "6c-652.8-306-665.6")


def profile_twin_orin_nano(out: Path, modes: tuple[str, ...] = TWIN_ORIN_NANO_MODES) -> Path:
    """The twin's ResNet-18 rows of ``modes`` on Orin Nano (20 minibatches each), written to the CSV ``out`` by
    ``jetpredict profile`` as a user would run it."""
    from jetpredict.cli import main

    assert main(["profile", "--device", "sim:orin-nano", "--workload", "resnet18-cifar10", "--modes", ",".join(modes),
                 "--minibatches", "20", "--out", str(out)]) == 0
    return out


def json_row(record: dict[str, str]) -> dict[str, object]:
    """A CSV record as a JSON row: numeric columns as numbers (counts as ints), an empty cell as None."""
    from jetpredict.api.schemas import ROW_CELL_TYPES
    from jetpredict.models.profile_rows import FIELD_BY_NAME

    out: dict[str, object] = {}
    for column, text in record.items():
        if text == "" or text is None:
            out[column] = None
        elif ROW_CELL_TYPES.get(column, "string") == "string":
            out[column] = text
        else:
            kind = FIELD_BY_NAME[column].kind if column in FIELD_BY_NAME else None
            out[column] = int(float(text)) if kind is int else float(text)
    return out


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_start_lines(database_url: str, data_dir: Path, env: dict[str, str] | None = None,
                      timeout_s: float = 30.0) -> str:
    """What ``jetpredict serve`` (Flask's server, a free port) prints on standard error up to its "listening on"
    line, over ``database_url`` and ``data_dir`` with ``env`` added to this process's environment; the server is
    stopped then, or after ``timeout_s`` without that line."""
    proc = subprocess.Popen([sys.executable, "-m", "jetpredict", "serve", "--server", "flask", "--port",
                             str(free_port()), "--database-url", database_url, "--data-dir", str(data_dir)],
                            env={**os.environ, **(env or {})}, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            text=True)
    lines: list[str] = []
    # A server that stays up printing nothing would block readline past the deadline: the stop comes from a
    # timer, whose kill ends the pipe (readline then returns "").
    timer = threading.Timer(timeout_s, proc.kill)
    timer.start()
    try:
        for line in proc.stderr:
            lines.append(line)
            if "listening on" in line:
                break
    finally:
        timer.cancel()
        proc.kill()
        proc.wait()
    return "".join(lines)


@contextlib.contextmanager
def busy_port() -> Iterator[int]:
    """A port on 127.0.0.1 that a socket listens on for the block: a server started there finds it taken."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


#: How a test's child process waits to be stopped by a signal: a minute in 50 ms naps. CPython acts on a signal
#: between bytecodes; one whose C handler runs after the last check before a long sleep's clock_nanosleep (the
#: child preempted just after its print, by the test it wakes) does not cut that sleep short, and a single
#: time.sleep(60) then ran to its end (3 of 60 SIGINTs sent on "switched" to a one-thread PlannedRound child
#: acted on only after its 20 s sleep; 0 of 60 with naps). A nap ends within 50 ms and the handler runs then, as
#: between a training loop's minibatches.
NAPPING_MINUTE = "for _ in range(1200): time.sleep(0.05)"

#: How long :meth:`LiveServer.stop` lets the service shut down by itself before it kills it (s).
STOP_GRACE_S = 3.0


class LiveServer:
    """``jetpredict serve`` in its own process group (so SIGKILL reaches the master and its workers)."""

    def __init__(self, data_dir: str | Path, api_keys: str = "test-key", workers: int = 2,
                 server: str = "auto", extra_env: dict[str, str] | None = None,
                 log_path: str | Path | None = None, database_url: str = "", own_metrics_dir: bool = True) -> None:
        self.data_dir = Path(data_dir)
        self.own_metrics_dir = own_metrics_dir  # False: `serve` makes its metric folder itself, as for a user
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.api_keys = api_keys
        self.workers = workers
        self.server = server
        self.extra_env = dict(extra_env or {})
        self.log_path = Path(log_path) if log_path else self.data_dir / "server.log"
        self.database_url = database_url  # empty: SQLite under data_dir
        self.process: subprocess.Popen | None = None

    def start(self) -> LiveServer:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        # Loopback load from one address would trip the per-client limits: off unless a test sets them.
        env = {**os.environ, "JETPREDICT_API_KEYS": self.api_keys, "JETPREDICT_RATE_LIMIT": "off",
               "JETPREDICT_RATE_LIMIT_ALL_MODES": "off", **self.extra_env}
        env.pop("JETPREDICT_DATABASE_URL", None)
        env.pop("PROMETHEUS_MULTIPROC_DIR", None)
        if self.own_metrics_dir:  # metric files live with the test's data: a SIGKILLed server leaves nothing in /tmp
            metrics_dir = self.data_dir / "metrics"
            metrics_dir.mkdir(exist_ok=True)
            env["PROMETHEUS_MULTIPROC_DIR"] = str(metrics_dir)
        self._log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "jetpredict", "serve", "--host", "127.0.0.1", "--port", str(self.port),
             "--workers", str(self.workers), "--data-dir", str(self.data_dir), "--server", self.server,
             *(["--database-url", self.database_url] if self.database_url else [])],
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
            # SIGINT: gunicorn's quick shutdown (SIGTERM waits for keep-alive connections to drain). A worker
            # still serving a request (a page's fetch) is waited on for the whole graceful_timeout (10 s):
            # nothing a test reads needs it, so the group is killed after STOP_GRACE_S.
            os.killpg(self.process.pid, signal.SIGINT)
            try:
                self.process.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                self.kill()
        if getattr(self, "_log", None):
            self._log.close()

    def __enter__(self) -> LiveServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


MAX_CLIENT_NUMBER = 10_000  # mixed_load's client numbers stay below this (row perturbations <= 1e-6)


def mixed_load(url: str, api_key: str, rows_for, clients: int = 8, duration_s: float = 5.0,
               shared_id: str = "shared-load", predict_id: str | None = None, first_client: int = 0) -> dict:
    """Uploads and predictions from ``clients`` threads for ``duration_s`` seconds; returns what was answered.

    Half the clients upload (one row per request, alternating between their own workload and one
    workload shared by all uploaders, so refits race); the other half predict 10 modes of
    ``predict_id``. ``rows_for(workload_id, i)`` gives the i-th row to upload for a workload.
    ``first_client`` numbers this call's clients from there (their own workloads are ``load-<k>``), so
    that loads run at once against several servers of one database do not share workloads by accident.
    Returns ``{"requests", "errors": [(status, text)], "answered_rows": {workload_id: n},
    "latencies_s": {"upload": [...], "predict": [...]}}``.
    """
    import threading

    import requests

    if first_client < 0 or first_client + clients > MAX_CLIENT_NUMBER:
        raise ValueError(f"client numbers {first_client}..{first_client + clients - 1} outside "
                         f"0..{MAX_CLIENT_NUMBER - 1} (the per-row perturbation must stay tiny)")
    modes = [{"cpu_cores": c, "cpu_mhz": 1190.4, "gpu_mhz": g, "emc_mhz": 1600.0}
             for c in (2, 4) for g in (318.75, 522.75, 675.75, 905.25, 1377.0)]
    stop_at = time.monotonic() + duration_s
    lock = threading.Lock()
    result: dict = {"requests": 0, "errors": [], "answered_rows": {}, "latencies_s": {"upload": [], "predict": []}}

    def note(status_ok: bool, response, workload: str | None, elapsed_s: float, kind: str) -> None:
        with lock:
            result["requests"] += 1
            result["latencies_s"][kind].append(elapsed_s)
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
            row = dict(rows_for(workload, i))
            # A distinct row per (uploader, i): identical rows would be one upload (content-hash idempotency).
            # The relative step 1e-15 (~4.5 float64 ulps) keeps every (k, i) distinct, and the whole change
            # below 1e-6 (k < MAX_CLIENT_NUMBER, i < 100_000), far inside the upload checks' tolerances
            # (energy vs power x time within 1.1x, one mode's rows within 1.2x).
            row["epoch_time_s"] = float(row["epoch_time_s"]) * (1 + 1e-15 * (i % 100_000 + 1 + 100_000 * k))
            r = session.post(url + "/v1/profiles", json={"rows": [row]},
                             headers={"X-API-Key": api_key}, timeout=60)
            note(r.status_code == 201, r, workload, time.perf_counter() - t0, "upload")
            i += 1

    def predictor() -> None:
        session = requests.Session()
        while time.monotonic() < stop_at:
            t0 = time.perf_counter()
            r = session.post(url + "/v1/predictions", json={"workload": {"id": predict_id}, "modes": modes},
                             timeout=60)
            ok = r.status_code == 200 and len(r.json()["predictions"]) == len(modes)
            note(ok, r, None, time.perf_counter() - t0, "predict")

    def guarded(work: Callable[..., None], *args: object) -> None:
        # A request that raises (a reset connection, a worker gone, a 200 that is not JSON) is an error of
        # the run: a thread that died of it would leave the errors empty and the load lighter.
        try:
            work(*args)
        except Exception as exc:  # noqa: BLE001 - whatever it was, the run reports it
            with lock:
                result["errors"].append((type(exc).__name__, str(exc)[:300]))

    threads = [threading.Thread(target=guarded, args=(uploader, k) if k % 2 == 0 else (predictor,))
               for k in range(first_client, first_client + clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return result


def _postgres_bindir() -> Path | None:
    """The server binaries of the newest PostgreSQL from the system packages (Debian layout), or PATH."""
    import shutil

    candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"),
                        key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0)
    if candidates:
        return candidates[-1].parent
    found = shutil.which("initdb")
    return Path(found).parent if found else None


def postgres_available() -> bool:
    return _postgres_bindir() is not None


class TempPostgres:
    """A throwaway PostgreSQL cluster on 127.0.0.1 (``initdb`` + ``pg_ctl``, trust auth, no fsync).

    For tests and benchmarks only: data lives in a temporary directory that :meth:`stop` removes. As
    root the server runs as the ``postgres`` user (PostgreSQL refuses to run as root).
    """

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.dir: Path | None = None
        self._as_user: list[str] = []

    def _run(self, *argv: str) -> None:
        subprocess.run([*self._as_user, *argv], check=True, capture_output=True, text=True, timeout=120)

    def start(self) -> TempPostgres:
        import shutil
        import tempfile

        bindir = _postgres_bindir()
        if bindir is None:
            raise RuntimeError("PostgreSQL server binaries not found (apt-get install postgresql)")
        self.dir = Path(tempfile.mkdtemp(prefix="jetpredict-pg-"))
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            shutil.chown(self.dir, "postgres", "postgres")
            self._as_user = ["runuser", "-u", "postgres", "--"]
        data = self.dir / "data"
        self._bindir = bindir  # before initdb: stop() needs it whatever fails next
        self._run(str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
                  "--no-sync", "--locale=C")
        self.start_server()
        return self

    def start_server(self) -> None:
        """Start (or restart) the server of this cluster on its port."""
        assert self.dir is not None
        # Loopback only; sockets in our dir; fsync off: the data is thrown away afterwards.
        options = f"-h 127.0.0.1 -p {self.port} -k {self.dir} -F -c max_connections=200"
        self._run(str(self._bindir / "pg_ctl"), "-D", str(self.dir / "data"), "-o", options, "-l",
                  str(self.dir / "log"), "-w", "-t", "60", "start")

    def stop_server(self) -> None:
        """Stop the server at once (the database "goes down"); :meth:`start_server` brings it back."""
        assert self.dir is not None
        self._run(str(self._bindir / "pg_ctl"), "-D", str(self.dir / "data"), "-m", "immediate", "-w", "stop")

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        """Create an empty database ``name`` (dropped first if it exists); returns its URL."""
        import sqlalchemy as sa

        engine = sa.create_engine(self.url(), isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as conn:
                conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
                conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
        finally:
            engine.dispose()
        return self.url(name)

    def stop(self) -> None:
        import shutil

        if self.dir is None:
            return
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            self._run(str(self._bindir / "pg_ctl"), "-D", str(self.dir / "data"), "-m", "immediate", "-w",
                      "stop")
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir = None

    def __enter__(self) -> TempPostgres:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


_READY_LINE = "jetpredict worker ready"
_GUNICORN_HOOKS = f'''
def post_worker_init(worker):
    worker.log.info("{_READY_LINE} pid=%s", worker.pid)
'''


def empty_postgresql(url: str) -> None:
    """Drop and recreate schema ``public`` of the database at ``url``: a fresh, empty database."""
    import sqlalchemy as sa
    from jetpredict.api.database_url import normalize_url

    engine = sa.create_engine(normalize_url(url))
    try:
        with engine.begin() as conn:
            conn.execute(sa.text("DROP SCHEMA IF EXISTS public CASCADE"))
            conn.execute(sa.text("CREATE SCHEMA public"))
    finally:
        engine.dispose()


def database_of_process(url: str, process: str | None) -> str:
    """The PostgreSQL database at ``url`` for one of several test processes: with ``process`` (pytest-xdist's
    ``PYTEST_XDIST_WORKER``, e.g. ``gw1``) the database ``<name>_<process>`` on the same server, created
    when missing, so that one process emptying its database (:func:`empty_postgresql`) never drops the
    tables under another's test; ``url`` itself without."""
    if not process:
        return url
    import re

    import sqlalchemy as sa
    from jetpredict.api.database_url import normalize_url

    if not re.fullmatch(r"\w+", process):
        raise ValueError(f"test process name {process!r}: letters, digits and _ only")
    given = sa.engine.make_url(url)
    name = f"{given.database}_{process}"
    engine = sa.create_engine(normalize_url(url), isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            if conn.execute(sa.text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name}).first() is None:
                conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    finally:
        engine.dispose()
    return given.set(database=name).render_as_string(hide_password=False)


def gunicorn_first_boot(database_url: str, workers: int = 4, timeout_s: float = 90.0,
                        work_dir: str | Path | None = None) -> dict:
    """Boot ``gunicorn -w N jetpredict.api.wsgi:app`` (no preload: every worker runs ``create_app`` and its
    schema creation at the same moment) on ``database_url`` and report whether all workers came up.

    Returns ``{"ok", "workers_ready", "worker_failures", "healthz", "seconds", "log_tail"}``.
    """
    import tempfile
    import urllib.error

    tmp = Path(work_dir or tempfile.mkdtemp(prefix="jetpredict-boot-"))
    tmp.mkdir(parents=True, exist_ok=True)
    hooks = tmp / "gunicorn_hooks.py"
    hooks.write_text(_GUNICORN_HOOKS)
    log_path = tmp / "gunicorn.log"
    port = free_port()
    env = {**os.environ, "JETPREDICT_DATABASE_URL": database_url, "JETPREDICT_API_KEYS": "boot-key",
           "JETPREDICT_RATE_LIMIT": "off", "JETPREDICT_RATE_LIMIT_ALL_MODES": "off",
           "JETPREDICT_DATA_DIR": str(tmp / "data")}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    t0 = time.monotonic()
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-w", str(workers), "-b", f"127.0.0.1:{port}", "-c", str(hooks),
             "--log-level", "info", "jetpredict.api.wsgi:app"],
            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        healthz, ready, failures = None, 0, 0
        try:
            while time.monotonic() - t0 < timeout_s:
                text = log_path.read_text(errors="replace")
                ready = text.count(_READY_LINE)
                failures = text.count("Worker failed to boot") + text.count("Exception in worker process")
                if failures or proc.poll() is not None or ready >= workers:
                    break
                time.sleep(0.1)
            if ready >= workers and not failures:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as r:
                        healthz = r.status
                except (urllib.error.URLError, OSError) as err:
                    healthz = getattr(err, "code", None) or str(err)
            seconds = time.monotonic() - t0
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGINT)
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
    text = log_path.read_text(errors="replace")
    return {"ok": ready >= workers and not failures and healthz == 200, "workers_ready": ready,
            "worker_failures": failures, "healthz": healthz, "seconds": round(seconds, 2),
            "log_tail": text[-3000:]}
