"""Time from ``jetpredict serve`` to its first 200 on ``/healthz``, as the README's first command runs it.

DESIGN.md: "``serve`` answers within 15 s". Each boot starts the installed ``jetpredict`` console script
(``python -m jetpredict`` where there is none) with ``--server`` as given (default ``auto``, as the README runs
it: gunicorn when the ``[server]`` extra is installed, else Flask's server, which the README's first command
installs alone) and default settings,
from an empty temporary folder (so the default ``./data`` SQLite store is new) and with no ``JETPREDICT_*``
variable set; only ``--port`` is given, a free one, since 8080 may be taken here. The clock runs from the
process start to the first ``/healthz`` answered 200. Boots interleave the worker counts round by round (the
machine's drift spreads over all), ``--boots`` per count; the default count (2, no ``--workers`` flag) is the
README's command and holds the target, the others show how a boot grows with the workers
(``boot s ~ workers^b``). ``--stored`` sizes boot the default count over a store that already holds that many
workloads (4 published rows each, uploaded through the API before the clock starts), so a boot's growth
with the store it opens is measured too (``boot s ~ stored workloads^b``, on the sizes above 0; 0 is the
empty folder, the README's first start). A warm OS page cache is assumed: the first start after it is dropped reads the
libraries from disk and takes longer. The target prints met / NOT met and the run exits 1 on a miss. Only
``--write`` writes ``bench/results/serve_boot.json`` and ``.md`` (``serve_boot_flask`` / ``_gunicorn`` for an
explicit ``--server``). ``bench/api_boots.py`` times a different
start: plain ``gunicorn -w N`` without preload on an empty PostgreSQL.

    python bench/serve_boot.py [--server auto|flask|gunicorn] [--workers default,1,4] [--stored 10,100,1000]
        [--boots 5] [--write]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from results_io import exponent_text, growth_exponent, report_targets, write_results

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tools.testing
#: DESIGN.md: "`serve` answers within 15 s".
TARGET_S = 15.0
#: Workers of ``serve`` without ``--workers`` (``api.config``'s default): the README's command.
DEFAULT = "default"
#: A boot not answering by then counts as failed (s); well past the target, so a miss still has a figure.
GIVE_UP_S = 90.0
#: Workloads in the store of the boots over an existing one (``--stored``).
STORED = (10, 100, 1_000)
#: Workloads per upload while a store is filled (4 rows each: 200 rows a request).
STORE_BATCH = 50


def serve_command(port: int, workers: int | None, server: str) -> list[str]:
    """The README's ``jetpredict serve``, on ``port``, with the ``--server`` its ``auto`` picks here (or the one
    asked for); ``--workers`` only when ``workers`` is given."""
    script = Path(sys.executable).with_name("jetpredict")
    base = [str(script)] if script.exists() else [sys.executable, "-m", "jetpredict"]
    return [*base, "serve", "--port", str(port), *(["--workers", str(workers)] if workers else []),
            "--server", server]


def stored_folders(sizes: list[int], root: Path) -> dict[int, Path]:
    """Per size, a folder under ``root`` whose ``./data`` store holds that many workloads, as ``serve`` run in
    it finds them: uploaded through the API (the service's own fit and storage), 4 published rows each."""
    from jetpredict.api.app import create_app

    from tools.testing import published_rows

    key, building = "k" * 32, root / "building"
    app = create_app({"DATA_DIR": str(building / "data"), "API_KEYS": key, "RATE_LIMIT": "off",
                      "RATE_LIMIT_ALL_MODES": "off", "ACCESS_LOG": "off"})
    client, stored, folders = app.test_client(), 0, {}
    for size in sorted(sizes):
        while stored < size:
            batch = range(stored, min(size, stored + STORE_BATCH))
            rows = [r for i in batch for r in published_rows(as_id=f"stored-{i}")]
            answer = client.post("/v1/profiles", json={"rows": rows}, headers={"X-API-Key": key})
            if answer.status_code != 201:
                raise RuntimeError(f"storing workloads for the boot: {answer.status_code} {answer.get_data(as_text=True)}")
            stored = batch[-1] + 1
        app.extensions["jetpredict"].storage.dispose()  # the SQLite file whole, no connection holding it
        folders[size] = root / f"stored-{size}"
        shutil.copytree(building, folders[size])
    return folders


def boot_once(workers: int | None, server: str, store: Path | None = None, stored: int = 0) -> dict:
    """Start ``serve`` in a fresh folder (a copy of ``store``, whose store holds ``stored`` workloads, if given),
    wait for ``/healthz`` to answer 200, stop it; the seconds it took."""
    from tools.testing import free_port

    env = {k: v for k, v in os.environ.items() if not k.startswith("JETPREDICT_") and k != "PROMETHEUS_MULTIPROC_DIR"}
    with tempfile.TemporaryDirectory(prefix="jetpredict-serve-boot-") as tmp:
        if store is not None:  # copied before the clock starts: a boot reads the store, it does not fill it
            shutil.copytree(store, tmp, dirs_exist_ok=True)
        port = free_port()
        log_path = Path(tmp) / "serve.log"
        with log_path.open("wb") as log:
            t0 = time.monotonic()
            proc = subprocess.Popen(serve_command(port, workers, server), cwd=tmp, env=env, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)
            status, seconds = None, None
            try:
                while time.monotonic() - t0 < GIVE_UP_S and proc.poll() is None:
                    try:
                        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as r:
                            status = r.status
                    except urllib.error.HTTPError as err:  # up, but not healthy: keep waiting for a 200
                        status = err.code
                    except OSError:
                        pass
                    if status == 200:
                        seconds = time.monotonic() - t0
                        break
                    time.sleep(0.05)
            finally:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGINT)  # gunicorn's quick shutdown
                    try:
                        proc.wait(timeout=15)
                    except subprocess.TimeoutExpired:
                        os.killpg(proc.pid, signal.SIGKILL)
                        proc.wait()
        tail = "" if seconds is not None else log_path.read_text(errors="replace")[-2000:]
    return {"workers": workers or DEFAULT, "stored": stored,
            "ok": seconds is not None, "seconds": seconds, "last_status": status, "log_tail": tail}


def _boots_summary(runs: list[dict]) -> dict:
    """Boots, those that answered 200, median and max s of ``runs``."""
    seconds = [b["seconds"] for b in runs if b["ok"]]
    return {"boots": len(runs), "ok": len(seconds), "median_s": statistics.median(seconds) if seconds else None,
            "max_s": max(seconds) if seconds else None}


def summarize(boots: list[dict], counts: list[int | None], default_workers: int, stored: list[int] = ()) -> dict:
    """Per worker count (empty store): boots, those that answered 200, median and max s; the growth over the
    counts. With ``stored`` sizes, the same per size of the store the default count booted over (0: the empty
    folder's boots), and the growth over the sizes above 0."""
    empty = [b for b in boots if not b.get("stored")]
    sizes = [{"workers": workers or default_workers, "flag": workers is not None,
              **_boots_summary([b for b in empty if b["workers"] == (workers or DEFAULT)])} for workers in counts]
    growth = growth_exponent((s["workers"], s["median_s"]) for s in sizes if s["median_s"])
    out = {"target_s": TARGET_S, "sizes": sizes, "growth_exponent_median_s": growth}
    if stored:
        by_stored = [{"stored": n, **_boots_summary([b for b in boots if b["workers"] == DEFAULT
                                                     and b.get("stored", 0) == n])} for n in sorted({0, *stored})]
        out["by_stored"] = by_stored
        out["growth_exponent_stored_median_s"] = growth_exponent((s["stored"], s["median_s"]) for s in by_stored)
    return out


def verdict(result: dict) -> dict[str, bool | None]:
    """DESIGN's 15 s for the README's command (no ``--workers``): every boot answered 200 within it."""
    readme = [s for s in result["sizes"] if not s["flag"]]
    if not readme:
        return {f"serve answers within {result['target_s']:g} s": None}
    s = readme[0]
    out = {f"serve answers within {result['target_s']:g} s, every boot ({s['ok']} of {s['boots']} answered)":
           _within(s, result["target_s"])}
    stored = [s for s in result.get("by_stored", ()) if s["stored"]]
    if stored:
        out[f"serve answers within {result['target_s']:g} s over a store of up to {stored[-1]['stored']:,} "
            f"workloads, every boot ({sum(s['ok'] for s in stored)} of {sum(s['boots'] for s in stored)} "
            "answered)"] = all(_within(s, result["target_s"]) for s in stored)
    return out


def _within(s: dict, target_s: float) -> bool:
    """Every boot of a summary row answered 200 within ``target_s``."""
    return s["ok"] == s["boots"] and s["max_s"] is not None and s["max_s"] <= target_s


def markdown(result: dict) -> str:
    """The Markdown report of a run from its result (what ``--write`` stores as JSON)."""
    lines = ["# `jetpredict serve` to its first 200 on /healthz (`bench/serve_boot.py`)", "",
             f"The README's `jetpredict serve` (server: {result['server']}; default settings, a free "
             f"`--port`), from an empty folder each time (a new SQLite store), {result['boots_per_count']} boots "
             f"per worker count, rounds interleaving the counts; {result['cpu_count']} CPU cores, load average "
             f"{result['load_avg_1m']:.1f} at the end; warm OS page cache. Target (DESIGN.md): within "
             f"{result['target_s']:g} s, for the command as the README runs it (no `--workers`).", "",
             "| workers | boots | answered 200 | median s | max s | within target |", "|---|---|---|---|---|---|"]
    sizes = sorted(result["sizes"], key=lambda s: s["workers"])
    for s in sizes:
        within = ("-" if s["max_s"] is None
                  else "yes" if s["ok"] == s["boots"] and s["max_s"] <= result["target_s"] else "NO")
        median = "-" if s["median_s"] is None else f"{s['median_s']:.1f}"
        worst = "-" if s["max_s"] is None else f"{s['max_s']:.1f}"
        name = ("one process (Flask's server)" if result["server"] == "flask"
                else f"{s['workers']}" + ("" if s["flag"] else " (default)"))
        lines.append(f"| {name} | {s['boots']} | {s['ok']} | {median} | {worst} | {within} |")
    counts = ", ".join(str(s["workers"]) for s in sizes)
    if len(sizes) > 1:
        lines += ["", f"Growth with the workers ({counts}): median boot s ~ workers^"
                  f"{exponent_text(result['growth_exponent_median_s'])} (the app is imported once in the master and "
                  "the workers fork from it)."]
    if result.get("by_stored"):
        lines += ["", "Over an existing store (the default worker count; 0 = the empty folder above): a fresh "
                  "copy of a folder whose `./data` store holds that many workloads, 4 published rows each, "
                  "uploaded through the API before the clock starts.", "",
                  "| stored workloads | boots | answered 200 | median s | max s | within target |",
                  "|---|---|---|---|---|---|"]
        for s in result["by_stored"]:
            within = "-" if s["max_s"] is None else "yes" if _within(s, result["target_s"]) else "NO"
            median = "-" if s["median_s"] is None else f"{s['median_s']:.1f}"
            worst = "-" if s["max_s"] is None else f"{s['max_s']:.1f}"
            lines.append(f"| {s['stored']:,} | {s['boots']} | {s['ok']} | {median} | {worst} | {within} |")
        sized = ", ".join(f"{s['stored']:,}" for s in result["by_stored"] if s["stored"])
        lines += ["", f"Growth with the stored workloads ({sized}): median boot s ~ stored^"
                  f"{exponent_text(result['growth_exponent_stored_median_s'])} (a boot checks the store's format "
                  "and tables and reads no workload: `Storage.create_schema`)."]
    lines.append("")
    lines += [f"Target {target}: **{'met' if ok else 'NOT met' if ok is False else 'not measured'}**."
              for target, ok in verdict(result).items()]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default=f"{DEFAULT},1,4",
                        help=f"worker counts, comma-separated; '{DEFAULT}' is serve without --workers")
    parser.add_argument("--stored", default=",".join(map(str, STORED)),
                        help="workloads in the store the default worker count also boots over, comma-separated "
                             "('' or 0: the empty folder only)")
    parser.add_argument("--boots", type=int, default=5, help="boots per worker count and per stored size")
    parser.add_argument("--server", choices=("auto", "flask", "gunicorn"), default="auto",
                        help="serve's --server (auto: gunicorn when installed, else Flask's; Flask's is one process)")
    parser.add_argument("--write", action="store_true", help="write the figures to bench/results/")
    args = parser.parse_args(argv)
    from jetpredict.api.config import load_settings
    from jetpredict.api.serve_cli import gunicorn_available

    # serve's own choice for auto, resolved once: what ran names the table's rows and the results file.
    server = args.server if args.server != "auto" else "gunicorn" if gunicorn_available() else "flask"
    counts = [None if w.strip() == DEFAULT else int(w) for w in args.workers.split(",") if w.strip()]
    if server == "flask":  # one process: Flask's server takes no --workers
        counts = [None]
    stored = sorted({int(n) for n in args.stored.split(",") if n.strip() and int(n) > 0})
    boots: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="jetpredict-serve-stores-") as stores:
        folders = stored_folders(stored, Path(stores)) if stored else {}
        # One round boots every count and every store, so the machine's drift spreads over all of them.
        plan = [(workers, 0) for workers in counts] + [(None, n) for n in stored]
        for round_no in range(args.boots):
            for workers, n in plan:
                boot = boot_once(workers, server, folders.get(n), n)
                print(f"round {round_no + 1}, workers {workers or DEFAULT}, stored {boot['stored']}: "
                      + (f"{boot['seconds']:.1f} s" if boot["ok"] else f"no 200 (last status {boot['last_status']})"),
                      flush=True)
                if not boot["ok"]:
                    print(boot["log_tail"], file=sys.stderr)
                boots.append(boot)
    result = {**summarize(boots, counts, load_settings({}, environ={}).WORKERS, stored), "boots_per_count": args.boots,
              "server": server,
              "cpu_count": os.cpu_count(), "load_avg_1m": os.getloadavg()[0], "python": platform.python_version(),
              "runs": [{k: v for k, v in b.items() if k != "log_tail"} for b in boots]}
    text = markdown(result)
    print(text)
    if args.write:
        write_results("serve_boot" if server == "gunicorn" else "serve_boot_flask", text, result)
    return report_targets(verdict(result))


if __name__ == "__main__":
    sys.exit(main())
