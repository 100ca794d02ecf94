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
(``boot s ~ workers^b``). A warm OS page cache is assumed: the first start after it is dropped reads the
libraries from disk and takes longer. The target prints met / NOT met and the run exits 1 on a miss. Only
``--write`` writes ``bench/results/serve_boot.json`` and ``.md`` (``serve_boot_flask`` / ``_gunicorn`` for an
explicit ``--server``). ``bench/api_boots.py`` times a different
start: plain ``gunicorn -w N`` without preload on an empty PostgreSQL.

    python bench/serve_boot.py [--server auto|flask|gunicorn] [--workers default,1,4] [--boots 5] [--write]
"""

from __future__ import annotations

import argparse
import os
import platform
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


def serve_command(port: int, workers: int | None, server: str) -> list[str]:
    """The README's ``jetpredict serve``, on ``port``, with the ``--server`` its ``auto`` picks here (or the one
    asked for); ``--workers`` only when ``workers`` is given."""
    script = Path(sys.executable).with_name("jetpredict")
    base = [str(script)] if script.exists() else [sys.executable, "-m", "jetpredict"]
    return [*base, "serve", "--port", str(port), *(["--workers", str(workers)] if workers else []),
            "--server", server]


def boot_once(workers: int | None, server: str) -> dict:
    """Start ``serve`` in a fresh folder, wait for ``/healthz`` to answer 200, stop it; the seconds it took."""
    from tools.testing import free_port

    env = {k: v for k, v in os.environ.items() if not k.startswith("JETPREDICT_") and k != "PROMETHEUS_MULTIPROC_DIR"}
    with tempfile.TemporaryDirectory(prefix="jetpredict-serve-boot-") as tmp:
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
    return {"workers": workers or DEFAULT, "ok": seconds is not None, "seconds": seconds, "last_status": status,
            "log_tail": tail}


def summarize(boots: list[dict], counts: list[int | None], default_workers: int) -> dict:
    """Per worker count: boots, those that answered 200, median and max s; the growth over the counts."""
    sizes = []
    for workers in counts:
        runs = [b for b in boots if b["workers"] == (workers or DEFAULT)]
        seconds = [b["seconds"] for b in runs if b["ok"]]
        sizes.append({"workers": workers or default_workers, "flag": workers is not None, "boots": len(runs),
                      "ok": len(seconds), "median_s": statistics.median(seconds) if seconds else None,
                      "max_s": max(seconds) if seconds else None})
    growth = growth_exponent((s["workers"], s["median_s"]) for s in sizes if s["median_s"])
    return {"target_s": TARGET_S, "sizes": sizes, "growth_exponent_median_s": growth}


def verdict(result: dict) -> dict[str, bool | None]:
    """DESIGN's 15 s for the README's command (no ``--workers``): every boot answered 200 within it."""
    readme = [s for s in result["sizes"] if not s["flag"]]
    if not readme:
        return {f"serve answers within {result['target_s']:g} s": None}
    s = readme[0]
    return {f"serve answers within {result['target_s']:g} s, every boot ({s['ok']} of {s['boots']} answered)":
            s["ok"] == s["boots"] and s["max_s"] is not None and s["max_s"] <= result["target_s"]}


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
    lines.append("")
    lines += [f"Target {target}: **{'met' if ok else 'NOT met' if ok is False else 'not measured'}**."
              for target, ok in verdict(result).items()]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default=f"{DEFAULT},1,4",
                        help=f"worker counts, comma-separated; '{DEFAULT}' is serve without --workers")
    parser.add_argument("--boots", type=int, default=5, help="boots per worker count")
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
    boots: list[dict] = []
    for round_no in range(args.boots):
        for workers in counts:
            boot = boot_once(workers, server)
            print(f"round {round_no + 1}, workers {workers or DEFAULT}: "
                  + (f"{boot['seconds']:.1f} s" if boot["ok"] else f"no 200 (last status {boot['last_status']})"),
                  flush=True)
            if not boot["ok"]:
                print(boot["log_tail"], file=sys.stderr)
            boots.append(boot)
    result = {**summarize(boots, counts, load_settings({}, environ={}).WORKERS), "boots_per_count": args.boots,
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
