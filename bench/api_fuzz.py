"""Long schemathesis fuzz run against a live ``jetpredict serve`` (gunicorn, 2 workers) on loopback.

All routes of ``/openapi.json``, schemathesis phases examples + coverage + fuzzing, schema-valid and
schema-invalid data; checks: no 5xx, documented status codes, content types, headers and response
schemas. A stored workload ``my-resnet`` (the id in the OpenAPI examples) makes the examples succeed.
Writes ``bench/results/api_fuzz.json`` and ``.md``; exit status 0 when no check failed and at least
``--min-requests`` requests were made.

    python bench/api_fuzz.py [--max-examples 60] [--max-time 240]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "api"))
RESULTS = ROOT / "bench" / "results"
KEY = "fuzz-key"
CHECKS = ("not_a_server_error,status_code_conformance,content_type_conformance,response_headers_conformance,"
          "response_schema_conformance")


def server_exceptions(log: str) -> dict[str, int]:
    """Count the exceptions whose tracebacks the server logged, by their last line (type: message)."""
    counts: dict[str, int] = {}
    lines = log.splitlines()
    for i, line in enumerate(lines):
        if not line.startswith("Traceback"):
            continue
        for later in lines[i + 1:]:
            if later and not later.startswith((" ", "Traceback", "During handling", "The above exception")):
                key = later[:160]
                counts[key] = counts.get(key, 0) + 1
                break
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-examples", type=int, default=60, help="per operation and phase")
    parser.add_argument("--max-time", type=int, default=240, help="s, budget of the whole run")
    parser.add_argument("--min-requests", type=int, default=500)
    parser.add_argument("--seed", type=int, default=6)
    args = parser.parse_args(argv)

    import requests
    from api_fixtures import published_rows
    from jetpredict.api.testing import LiveServer

    st = shutil.which("st") or shutil.which("schemathesis")
    if st is None:
        print("schemathesis CLI (st) not found; pip install schemathesis", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp, LiveServer(Path(tmp) / "data", api_keys=KEY) as server:
        r = requests.post(server.url + "/v1/profiles", json={"rows": published_rows()},
                          headers={"X-API-Key": KEY}, timeout=60)
        r.raise_for_status()
        report = Path(tmp) / "report.json"
        command = [st, "run", server.url + "/openapi.json", "-H", f"X-API-Key: {KEY}", "--checks", CHECKS,
                   "--phases", "examples,coverage,fuzzing", "--mode", "all", "-n", str(args.max_examples),
                   "--max-time", str(args.max_time), "--seed", str(args.seed), "--workers", "2",
                   "--request-timeout", "60", "--generation-database", "none", "--no-color",
                   "--report", "json", "--report-json-path", str(report)]
        t0 = time.perf_counter()
        run = subprocess.run(command, capture_output=True, text=True, timeout=args.max_time + 300)
        wall_s = time.perf_counter() - t0
        if not report.exists():
            print(run.stdout[-5000:], run.stderr[-3000:], file=sys.stderr)
            return 2
        data = json.loads(report.read_text())
        server_log = (Path(tmp) / "data" / "server.log").read_text(errors="replace")

    cases = data["test_cases"]
    result = {
        "schemathesis_version": data["schemathesis_version"], "seed": args.seed, "wall_s": wall_s,
        "operations_tested": data["operations"]["tested"], "operations_total": data["operations"]["total"],
        "requests": cases["generated"], "with_failures": cases["with_failures"],
        "unique_failures": cases["unique_failures"], "failures": data["failures"], "errors": data["errors"],
        "phases": {k: v["status"] for k, v in data["phases"].items()}, "checks": CHECKS.split(","),
        "server_tracebacks": server_log.count("Traceback"),
        "server_exceptions": server_exceptions(server_log),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "api_fuzz.json").write_text(json.dumps(result, indent=2) + "\n")
    text = "\n".join([
        "# API fuzz run (`bench/api_fuzz.py`)", "",
        f"schemathesis {result['schemathesis_version']} against a live gunicorn server, seed {args.seed}, "
        f"{result['wall_s']:.0f} s: **{result['requests']} requests** over "
        f"{result['operations_tested']}/{result['operations_total']} operations; "
        f"phases {', '.join(f'{k}={v}' for k, v in result['phases'].items())}.", "",
        f"Checks: {', '.join(result['checks'])}.", "",
        f"Test cases with failures: **{result['with_failures']}**; schemathesis-internal errors: "
        f"{result['errors'] or 'none'}; tracebacks in the server log: {result['server_tracebacks']}.", ""])
    (RESULTS / "api_fuzz.md").write_text(text)
    print(text)
    if result["with_failures"]:
        print(run.stdout[-8000:])
    ok = result["with_failures"] == 0 and result["requests"] >= args.min_requests
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
