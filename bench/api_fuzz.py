"""Long schemathesis fuzz run against a live ``jetpredict serve`` (gunicorn, 2 workers) on loopback.

All routes of ``/openapi.json``, schemathesis phases examples + coverage + fuzzing + stateful (the
OpenAPI links: upload, then read / delete / predict the stored workload), schema-valid and
schema-invalid data, once with the API key and once without; checks: no 5xx, documented status codes,
content types, headers and response schemas, and ``positive_data_acceptance`` ("schema-valid request
rejected": a 400 or 422 to a request the document allows). The rules the document states beyond JSON
Schema (``x-jetpredict-rules``: stall at most the epoch, one set of knobs per mode label, unique client
ids ...) are applied to the generated schema-valid bodies by ``tests/api/documented_rules.py``, loaded
with ``SCHEMATHESIS_HOOKS``. A stored workload ``my-resnet`` (the id in the OpenAPI examples) makes the
examples succeed. The 422 messages behind each "rejected" are listed. The mix runs with the key on most of
``--max-time`` and without it on the rest, each stopped by its budget (so schemathesis, not the run, sets how
many requests fit). How the server's cost grows with the requests is read off its access log, in the order it
answered them, over every run (one server: the store fills as they go): its time over the first 250, 500,
1,000 ... requests, ``server s ~ requests^b`` (1: each request costs the same however many came before). Only
``--write`` writes ``bench/results/api_fuzz.json`` and ``.md``; ``--without-rules`` (no hook: what breaking the
documented rules gets) writes ``api_fuzz_without_rules.*``, and ``--database postgresql`` adds ``_postgresql``
to either name. Stored: both SQLite runs; the PostgreSQL forms are not (a run needs PostgreSQL's server
binaries). :func:`markdown` renders a stored JSON to its ``.md`` (``tests/test_benches.py`` checks they agree).

    python bench/api_fuzz.py [--max-examples 60] [--max-time 300] [--seed 6] [--without-rules] [--database ...]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
from results_io import exponent_text, growth_exponent, write_results

ROOT = Path(__file__).resolve().parents[1]
TESTS_API = ROOT / "tests" / "api"
sys.path.insert(0, str(ROOT))  # tools.testing
KEY = "fuzz-key"
CHECKS = ("not_a_server_error,status_code_conformance,content_type_conformance,response_headers_conformance,"
          "response_schema_conformance,positive_data_acceptance,negative_data_rejection")
#: Words in the title of schemathesis's negative_data_rejection failures (the server accepted what the
#: schema forbids), whatever the exact title of the version.
SCHEMA_VIOLATING_ACCEPTED = "schema-violating"


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


#: Routes listed in the markdown (the json keeps every route).
SLOWEST_ROUTES = 10
#: The first prefix of the access log the growth is read at; each next one doubles it (requests).
FIRST_PREFIX = 250
#: An access-log line of the service (api.app): method, path, status and the time the request took (ms).
ACCESS_LINE = re.compile(r'"([A-Z]+) (\S+)" (\d{3}) \S+ ([\d.]+)ms$')


def route_of(path: str) -> str:
    """The route of a request path: the ``/v1/<collection>`` prefix, with anything after it as ``/{id}``."""
    parts = path.split("?")[0].split("/")
    return "/".join(parts[:3]) + ("/{id}..." if len(parts) > 3 and parts[3] else "")


def server_times(log: str) -> dict[str, dict[str, float]]:
    """Per route (``METHOD /v1/collection[/{id}...]``), the count, the total (s) and the p50 / p99 / max of
    the time the server took (ms, from its access log): where a fuzz run's server time goes, and its slowest
    answer."""
    times: dict[str, list[float]] = {}
    for line in log.splitlines():
        m = ACCESS_LINE.search(line)
        if m:
            times.setdefault(f"{m.group(1)} {route_of(m.group(2))}", []).append(float(m.group(4)))
    return {route: {"requests": len(t), "total_s": sum(t) / 1000, "p50_ms": float(np.percentile(t, 50)),
                    "p99_ms": float(np.percentile(t, 99)), "max_ms": max(t)}
            for route, t in sorted(times.items(), key=lambda kv: -max(kv[1]))}


def answer_kind(m: re.Match) -> str:
    """An access line's route (as :func:`server_times` names them) and status class: ``POST /v1/profiles 2xx``."""
    return f"{m.group(1)} {route_of(m.group(2))} {m.group(3)[0]}xx"


def prefix_growth(log: str, first: int = FIRST_PREFIX, kind: str | None = None) -> list[tuple[int, float]]:
    """``(requests, server s)`` over the first ``first``, ``2 first``, ... requests the access log records, in the
    order the server answered them, and over all of them: the server's cost as the run's size grows. ``kind``
    (:func:`answer_kind`): those answers only, e.g. a route's accepted requests, which a refusal's cost of a
    fraction of a millisecond does not dilute early in the run."""
    ms = [float(m.group(4)) for m in map(ACCESS_LINE.search, log.splitlines())
          if m and (kind is None or answer_kind(m) == kind)]
    total = np.cumsum(ms) / 1000
    sizes = [n for n in (first * 2 ** k for k in range(40)) if n < len(ms)] + ([len(ms)] if ms else [])
    return [(n, float(total[n - 1])) for n in sizes]


def rejected_messages(stdout: str) -> list[tuple[str, str]]:
    """(operation, message) of each "Schema-valid request rejected" failure schemathesis printed."""
    pairs = []
    parts = re.split(r"\n_{5,} (\S+ \S+) _{5,}\n", stdout)
    for operation, body in zip(parts[1::2], parts[2::2], strict=False):
        for failure in body.split("Test Case ID:")[1:]:
            if "Schema-valid request rejected" not in failure:
                continue
            m = re.search(r'"message":"((?:[^"\\]|\\.)*)"', failure)
            pairs.append((operation, m.group(1)[:200] if m else failure[:200]))
    return pairs


#: Statuses that reject a request: schemathesis's defaults plus 413 and 414, which the service answers when a
#: body or URL breaks a size rule of the document (a rows array over maxItems is also over the body limit).
REJECTING_STATUSES = ("400", "401", "403", "404", "405", "406", "409", "413", "414", "415", "422", "428", "429",
                      "5xx")


def schemathesis_config(tmp: Path) -> Path:
    """A ``schemathesis.toml`` that counts every rejecting status as a rejection of schema-violating data."""
    path = tmp / "schemathesis.toml"
    statuses = ", ".join(f'"{s}"' for s in REJECTING_STATUSES)
    path.write_text(f"[checks.negative_data_rejection]\nexpected-statuses = [{statuses}]\n")
    return path


#: (API key?, share of --max-time) per run: the mix with the key, then without it.
VARIANTS = ((True, 0.8), (False, 0.2))


def run_variant(st: str, url: str, key: str | None, args, tmp: Path, max_time_s: int) -> dict:
    report = tmp / f"report-{'key' if key else 'nokey'}-{max_time_s}.json"
    command = [st, "--config-file", str(schemathesis_config(tmp)), "run", url + "/openapi.json", "--checks", CHECKS,
               "--phases", "examples,coverage,fuzzing,stateful", "--mode", "all", "-n", str(args.max_examples),
               "--max-time", str(max_time_s), "--seed", str(args.seed), "--workers", "2",
               "--request-timeout", "60", "--generation-database", "none", "--no-color",
               "--report", "json", "--report-json-path", str(report)]
    if key:
        command[5:5] = ["-H", f"X-API-Key: {key}"]
    t0 = time.perf_counter()
    env = dict(os.environ)
    if not args.without_rules:
        env.update(SCHEMATHESIS_HOOKS="documented_rules",
                   PYTHONPATH=os.pathsep.join(filter(None, (str(TESTS_API), os.environ.get("PYTHONPATH")))))
    run = subprocess.run(command, capture_output=True, text=True, timeout=max_time_s + 300, env=env)
    wall_s = time.perf_counter() - t0
    if not report.exists():
        raise RuntimeError(run.stdout[-5000:] + run.stderr[-3000:])
    data = json.loads(report.read_text())
    cases = data["test_cases"]
    by_check: dict[str, int] = {}
    for f in data["failures"]:
        by_check[f["title"]] = by_check.get(f["title"], 0) + int(f.get("count", 1))
    rejected = rejected_messages(run.stdout)
    return {
        "api_key": bool(key), "budget_s": max_time_s, "wall_s": wall_s, "schemathesis_version": data["schemathesis_version"],
        "operations_tested": data["operations"]["tested"], "operations_total": data["operations"]["total"],
        "requests": cases["generated"], "with_failures": cases["with_failures"],
        "unique_failures": cases["unique_failures"], "failures_by_check": by_check, "errors": data["errors"],
        "phases": {k: v["status"] for k, v in data["phases"].items()},
        "rejected_positive": [{"operation": op, "message": msg} for op, msg in rejected],
        "stdout_tail": run.stdout[-6000:] if cases["with_failures"] else "",
    }


def markdown(result: dict) -> str:
    """The Markdown report of a run from its result (the dict ``--write`` stores as JSON): a stored
    ``api_fuzz*.json`` renders to its ``.md``."""
    variants = result["variants"]
    growth = exponent_text(result["growth_exponent_server_s_vs_requests"])
    lines = ["# API fuzz run (`bench/api_fuzz.py`)", "",
             f"schemathesis {variants[0]['schemathesis_version']} against a live gunicorn server on {result['database']}, "
             f"seed {result['seed']}, "
             "phases examples, coverage, fuzzing and stateful (OpenAPI links), schema-valid and schema-invalid "
             "data, with and without the API key.", "", f"Checks: {', '.join(result['checks'])}.", "",
             "| variant | budget s | wall s | server s | requests | requests/s | operations | test cases with failures | "
             "failures by check |", "|---|---|---|---|---|---|---|---|---|"]
    for v in variants:
        checks = ", ".join(f"{k}: {n}" for k, n in v["failures_by_check"].items()) or "none"
        lines.append(f"| {'key' if v['api_key'] else 'no key'} | {v['budget_s']} | {v['wall_s']:.0f} | "
                     f"{v['server_s']:.1f} | {v['requests']} | {v['requests_per_s']:.0f} | "
                     f"{v['operations_tested']}/{v['operations_total']} | {v['with_failures']} | {checks} |")
    per_request = " and ".join(f"{v['server_s'] * 1000 / max(v['requests'], 1):.1f}" for v in variants)
    lines += ["", f"Server time per request, with and without the key: {per_request} ms. Each run passes its budget "
              "to schemathesis's own --max-time and stops there.", "",
              f"Growth, the server's time over the first requests of the whole run in the order it answered them "
              f"(the store filling as they go): server s ~ requests^{growth} (1: each "
              "request costs the same however many came before).", "",
              "| requests | server s | ms per request |", "|---|---|---|"]
    lines += [f"| {n} | {s:.1f} | {s * 1000 / n:.1f} |" for n, s in result["server_s_by_requests"]]
    lines += ["", f"Per route and status class (those with at least {2 * FIRST_PREFIX} answers; the phases' mix of "
              "requests changes along the run, less so within one of them): server s ~ its answers^b, and the "
              f"server time per answer over its first {FIRST_PREFIX} and over all.", ""]
    lines += (["| route, status | answers | ms per answer, first | ms per answer, all | b |", "|---|---|---|---|---|"]
              if result["growth_by_route"] else [f"None reached {2 * FIRST_PREFIX} answers in this run."])
    for route, growth in result["growth_by_route"].items():
        p = growth["server_s_by_requests"]
        lines.append(f"| {route} | {p[-1][0]} | {p[0][1] * 1000 / p[0][0]:.1f} | {p[-1][1] * 1000 / p[-1][0]:.1f} | "
                     f"{exponent_text(growth['exponent'])} |")
    overruns = [v for v in variants if v["wall_s"] > 1.2 * v["budget_s"]]
    if overruns:
        lines += ["", "Past the budget: " + ", ".join(
            f"{'key' if v['api_key'] else 'no key'} {v['wall_s']:.0f} s of {v['budget_s']} s" for v in overruns) + "."]
    lines += ["",
              f"5xx answers: **{result['server_5xx']}**; tracebacks in the server log: {result['server_tracebacks']}; "
              f"schema-violating requests accepted (negative_data_rejection): **{result['schema_violating_accepted']}**.",
              "\"Schema-valid request rejected\" (schemathesis's positive_data_acceptance, "
              + ("plain: the document's x-jetpredict-rules NOT applied, so bodies that break them count"
                 if not result["documented_rules_applied"] else "the document's x-jetpredict-rules applied to the schema-valid bodies")
              + f"): **{result['schema_valid_rejected']}**.", ""]
    for r in result["rejected_messages"][:12]:
        lines.append(f"- {r['operation']}: {r['message'][:160]}")
    times = result["server_times"]
    busy_s = sum(t["total_s"] for t in times.values())
    lines += ["", f"Server time per route, all variants (ms, from the server's access log; the {SLOWEST_ROUTES} "
              f"routes with the slowest answer, of {len(times)}; the json has all). The server answered "
              f"{sum(t['requests'] for t in times.values())} requests in {busy_s:.0f} s in all (two workers) of the "
              f"{sum(v['wall_s'] for v in variants):.0f} s the variants ran: the rest of the wall time is the "
              "client's (schemathesis generating cases).", "",
              "| route | requests | p50 | p99 | max |", "|---|---|---|---|---|"]
    lines += [f"| {route} | {t['requests']} | {t['p50_ms']:.1f} | {t['p99_ms']:.1f} | {t['max_ms']:.0f} |"
              for route, t in list(times.items())[:SLOWEST_ROUTES]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-examples", type=int, default=60, help="per operation and phase")
    parser.add_argument("--max-time", type=int, default=300, help="s, budget of the whole run (all variants)")
    parser.add_argument("--min-requests", type=int, default=500)
    parser.add_argument("--seed", type=int, default=6)
    parser.add_argument("--write", action="store_true", help="write the figures to bench/results/")
    parser.add_argument("--database", choices=("sqlite", "postgresql"), default="sqlite",
                        help="the service's store: SQLite in a temporary directory, or a throwaway PostgreSQL "
                             "(needs the server binaries and the [postgres] extra)")
    parser.add_argument("--without-rules", action="store_true",
                        help="plain schemathesis (no hook): shows what breaking the documented rules gets; "
                             "writes api_fuzz_without_rules.*")
    args = parser.parse_args(argv)

    import requests

    from tools.testing import LiveServer, TempPostgres, published_rows

    st = shutil.which("st") or shutil.which("schemathesis")
    if st is None:
        print("schemathesis CLI (st) not found; pip install schemathesis", file=sys.stderr)
        return 2
    variants = []
    with contextlib.ExitStack() as stack:
        database_url = ""
        if args.database == "postgresql":
            postgres = TempPostgres().start()
            stack.callback(postgres.stop)  # the cluster goes whatever happens next
            database_url = postgres.create_database("jetpredict_fuzz")
        tmp = stack.enter_context(tempfile.TemporaryDirectory())
        server = stack.enter_context(LiveServer(Path(tmp) / "data", api_keys=KEY, database_url=database_url))
        r = requests.post(server.url + "/v1/profiles", json={"rows": published_rows()},
                          headers={"X-API-Key": KEY}, timeout=60)
        r.raise_for_status()
        log_path = Path(tmp) / "data" / "server.log"
        for keyed, share in VARIANTS:
            offset = log_path.stat().st_size
            variant = run_variant(st, server.url, KEY if keyed else None, args, Path(tmp), int(args.max_time * share))
            with log_path.open("rb") as log:  # this run's part of the access log: its server time
                log.seek(offset)
                own = server_times(log.read().decode(errors="replace"))
            variant["server_s"] = sum(t["total_s"] for t in own.values())
            variants.append(variant)
        server_log = log_path.read_text(errors="replace")

    server_5xx = sum(v["failures_by_check"].get("Server error", 0) for v in variants)
    rejected = [r for v in variants for r in v["rejected_positive"]]
    n_rejected = sum(v["failures_by_check"].get("Schema-valid request rejected", 0) for v in variants)
    other = {k: n for v in variants for k, n in v["failures_by_check"].items()
             if k not in ("Schema-valid request rejected",)}
    violating_accepted = sum(n for v in variants for title, n in v["failures_by_check"].items()
                             if SCHEMA_VIOLATING_ACCEPTED in title.lower())
    for v in variants:
        v["requests_per_s"] = v["requests"] / v["wall_s"] if v["wall_s"] else None
    prefixes = prefix_growth(server_log)
    server_growth = growth_exponent(prefixes)
    # The phases run in order (examples, coverage, fuzzing, stateful), so the whole log's growth mixes the
    # store filling with a changing mix of requests; per route and status class the mix changes less.
    kinds = Counter(answer_kind(m) for m in map(ACCESS_LINE.search, server_log.splitlines()) if m)
    by_route = {kind: prefix_growth(server_log, kind=kind) for kind, n in kinds.most_common()
                if n >= 2 * FIRST_PREFIX}
    result = {"seed": args.seed, "database": args.database, "documented_rules_applied": not args.without_rules,
              "checks": CHECKS.split(","), "variants": variants, "schema_violating_accepted": violating_accepted,
              "requests": sum(v["requests"] for v in variants), "server_5xx": server_5xx,
              "schema_valid_rejected": n_rejected, "rejected_messages": rejected,
              "other_failures": other, "server_tracebacks": server_log.count("Traceback"),
              "server_exceptions": server_exceptions(server_log), "server_times": server_times(server_log),
              "server_s_by_requests": prefixes, "growth_exponent_server_s_vs_requests": server_growth,
              "growth_by_route": {route: {"server_s_by_requests": p, "exponent": growth_exponent(p)}
                                  for route, p in by_route.items()}}
    text = markdown(result)
    print(text)
    if args.write:
        name = "api_fuzz_without_rules" if args.without_rules else "api_fuzz"
        write_results(name if args.database == "sqlite" else f"{name}_{args.database}", text, result)
    ok = (server_5xx == 0 and violating_accepted == 0 and (n_rejected == 0 or args.without_rules)
          and result["requests"] >= args.min_requests)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
