"""The benchmark scripts under ``bench/`` stay runnable: each imports, and a cheap one runs end to end
without writing its committed results (a plain run leaves the tree as it was)."""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
SCRIPTS = sorted(p.stem for p in BENCH.glob("*.py"))


@pytest.fixture
def bench_path(monkeypatch):
    """``bench/`` on the path; afterwards the path as it was, and no module of this checkout that the
    scripts imported under their own names (``results_io``, the API fixtures) left behind."""
    monkeypatch.syspath_prepend(str(BENCH))
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        # The package itself stays: a second copy of a jetpredict module would split its classes in two.
        if not name.startswith("jetpredict") and str(getattr(sys.modules[name], "__file__", "") or "").startswith(
                str(ROOT)):
            del sys.modules[name]


@pytest.mark.parametrize("name", SCRIPTS)
def test_every_bench_script_imports(name, bench_path):
    module = importlib.import_module(name)
    assert module.__doc__, f"bench/{name}.py says what it measures"


def test_a_plain_run_prints_its_growth_and_writes_nothing(bench_path, capsys):
    results = BENCH / "results"
    before = {p: p.stat().st_mtime_ns for p in results.iterdir()}
    mixed_fleet = importlib.import_module("mixed_fleet")
    assert mixed_fleet.main(["--sizes", "10,100", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert "slope (time ~ stored rows^b)" in out and "slope (time ~ devices^b)" in out
    assert {p: p.stat().st_mtime_ns for p in results.iterdir()} == before


def test_the_monotone_floor_finds_what_no_ordered_model_can_fit(bench_path):
    real_cv = importlib.import_module("real_cv_scoring")  # the scoring half of bench/real_cv.py
    knobs = np.array([[8, 1200], [8, 2100], [8, 2265]], float)
    pairs = real_cv.dominance_pairs(knobs)
    assert sorted(pairs) == [(0, 1), (0, 2), (1, 2)]
    ordered = np.array([60.0, 40.0, 38.0])
    assert np.allclose(real_cv.monotone_fit(ordered, pairs, 1), ordered)
    # The middle mode is 10% slower than the slowest-clocked one: an ordered fit must give up
    # one of the two, exactly log(1.1) of error in all.
    inverted = np.array([60.0, 66.0, 38.0])
    fit = real_cv.monotone_fit(inverted, pairs, 1)
    assert np.all(np.diff(fit) <= 1e-9)
    assert np.isclose(np.abs(np.log(fit / inverted)).sum(), np.log(1.1))
    # Power rises with the knobs: the same rows read as power are ordered the other way.
    assert np.allclose(real_cv.monotone_fit(ordered[::-1], pairs, -1), ordered[::-1])


def test_the_lenet5_sweep_alone_breaks_the_order_at_b_c_d(bench_path):
    real_cv = importlib.import_module("real_cv_scoring")  # the scoring half of bench/real_cv.py
    from jetpredict.models.profile_files import read_profile_csv

    rows = {(r["target"], r["quantity"]): r for r in real_cv.monotone_check(read_profile_csv(real_cv.REAL_CSV))}
    lenet_time = rows[("lenet5-mnist", "time")]
    assert lenet_time["inversions"] == {"b->c": 6.0, "b->d": 3.3}
    assert 0.5 < lenet_time["floor_mape"] < 0.7
    assert rows[("lenet5-mnist", "dynamic power")]["floor_mape"] > 5.0
    for target in ("resnet18-cifar10", "mobilenetv3-gld23k"):
        assert rows[(target, "time")]["floor_mape"] < 1e-6 and not rows[(target, "power")]["inversions"]


def test_a_design_score_splits_the_energy_error_between_time_and_power(bench_path):
    real_cv = importlib.import_module("real_cv_scoring")  # the scoring half of bench/real_cv.py
    from jetpredict.models.profile_files import read_profile_csv
    from jetpredict.predictor import calibration

    real = read_profile_csv(real_cv.REAL_CSV)
    rows = real[real["workload"] == "lenet5-mnist"].reset_index(drop=True)
    pick = tuple("abcdefghij".index(m) for m in "efij")
    s = real_cv.score_design(rows, pick, calibration.references(real, "lenet5-mnist")["other real"])
    test = rows.drop(index=list(pick))
    assert list(s["modes"]) == list("abcdgh")
    t_obs, e_obs = test["epoch_time_s"].to_numpy(float), test["epoch_energy_j"].to_numpy(float)
    t_pred = t_obs * (1 + s["time_signed"] / 100)
    p_pred = real_cv.power_of(test) * (1 + s["power_signed"] / 100)
    assert np.allclose(s["time_err"], np.abs(s["time_signed"]))
    # Energy with the measured time keeps only the power's error, and the reverse.
    assert np.allclose(s["energy_err_measured_time"], np.abs(p_pred * t_obs / e_obs - 1) * 100)
    assert np.allclose(s["energy_err_measured_power"], np.abs(t_pred * real_cv.power_of(test) / e_obs - 1) * 100)
    # Mode g (the only EMC 2133 MHz mode) is predicted slow and its energy high, as in the mean over every
    # 4-mode design (bench/results/real_cv.md: +6.3% and +10.7%).
    g = list(s["modes"]).index("g")
    assert s["time_signed"][g] > 5 and s["energy_signed"][g] > 10


def test_a_design_fitted_from_epoch_totals_loses_the_split_not_the_epoch(bench_path):
    """real_cv's ``[no components]`` rows: without the stall and compute columns the split is the reference's
    (ResNet-18 from e,f,i,j: its stall, 4% of its epoch, is predicted several times too long)."""
    real_cv = importlib.import_module("real_cv_scoring")
    from jetpredict.models.profile_files import read_profile_csv
    from jetpredict.predictor import calibration

    real = read_profile_csv(real_cv.REAL_CSV)
    rows = real[real["workload"] == "resnet18-cifar10"].reset_index(drop=True)
    pick, ref = tuple("abcdefghij".index(m) for m in "efij"), calibration.references(real, "resnet18-cifar10")
    split, totals = (real_cv.score_design(rows, pick, ref["other real"], components=c) for c in (True, False))
    assert np.median(totals["stall_err"]) > 100 > 20 > np.median(split["stall_err"])
    assert np.mean(split["time_err"]) < np.mean(totals["time_err"]) < 5  # 1.5% and 3.8%: the epoch holds


def test_per_mode_bias_averages_each_mode_over_the_designs_that_held_it_out(bench_path):
    real_cv = importlib.import_module("real_cv_scoring")  # the scoring half of bench/real_cv.py
    scores = [{"modes": np.array(["a", "b"]), **{f"{n}_signed": np.array([2.0, -4.0]) for _, n in real_cv.OUTPUTS}},
              {"modes": np.array(["a", "c"]), **{f"{n}_signed": np.array([4.0, 1.0]) for _, n in real_cv.OUTPUTS}}]
    bias = real_cv.per_mode_bias(scores)
    assert bias["time"] == {"a": 3.0, "b": -4.0, "c": 1.0} and bias["energy"] == bias["power"] == bias["time"]


def test_the_fuzz_bench_reads_the_server_time_per_route_from_the_access_log(bench_path):
    # Lines as api.app writes them; ids and query strings fold into one route, other lines are skipped.
    api_fuzz = importlib.import_module("api_fuzz")
    log = "\n".join([
        '2026-12-03 15:14:25,824 127.0.0.1 "POST /v1/profiles" 201 232 40.0ms',
        '2026-12-03 15:14:25,900 127.0.0.1 "POST /v1/profiles" 422 120 2.0ms',
        '2026-12-03 15:14:26,000 127.0.0.1 "GET /v1/workloads/my-resnet/rows?limit=5" 200 - 7.5ms',
        '2026-12-03 15:14:26,100 127.0.0.1 "GET /v1/workloads/other" 404 80 1.5ms',
        "Traceback (most recent call last):",
    ])
    times = api_fuzz.server_times(log)
    assert list(times) == ["POST /v1/profiles", "GET /v1/workloads/{id}..."]  # slowest answer first
    assert times["POST /v1/profiles"]["requests"] == 2 and times["POST /v1/profiles"]["max_ms"] == 40.0
    assert times["POST /v1/profiles"]["total_s"] == pytest.approx(0.042)
    assert times["GET /v1/workloads/{id}..."]["p50_ms"] == pytest.approx(4.5)


def test_the_fuzz_bench_reads_its_growth_off_the_access_log_in_answer_order(bench_path):
    """The keyed mix ran at two time budgets and schemathesis set how many requests fit: the larger budget
    served fewer (2,496 and 2,008), and the exponent read -3.2. Prefixes of the log grow by construction."""
    api_fuzz = importlib.import_module("api_fuzz")
    line = '2026-12-03 15:14:25,824 127.0.0.1 "GET /v1/workloads/w" 200 - {ms}ms'
    log = "\n".join(line.format(ms=1.0 + (i >= 4)) for i in range(10))  # requests 5-10 take 2 ms
    assert api_fuzz.prefix_growth(log, first=2) == [(2, 0.002), (4, 0.004), (8, pytest.approx(0.012)),
                                                    (10, pytest.approx(0.016))]
    assert api_fuzz.prefix_growth("no access line") == []
    upload = '2026-12-03 15:14:26,000 127.0.0.1 "POST /v1/profiles" 201 232 40.0ms'
    mixed = "\n".join([upload, log, upload])  # per route: only that route's requests, in their order
    assert api_fuzz.prefix_growth(mixed, first=1, kind="POST /v1/profiles 2xx") == [(1, 0.04), (2, 0.08)]
    assert api_fuzz.prefix_growth(mixed, first=1, kind="POST /v1/profiles 4xx") == []


def test_the_replay_summary_leaves_out_only_the_per_step_detail(bench_path):
    """A plain adaptive_replay run printed the real summary and the Cost section only: the twin's tables
    between them, which README quotes, went with the per-step detail."""
    adaptive_replay = importlib.import_module("adaptive_replay")
    text = "# R\nsummary\n## Steps (real)\nstep 1\n## Digital twin\ntwin\n### Over the default candidates\nall\n## Cost\nc\n"
    assert adaptive_replay.without_steps(text) == (
        "# R\nsummary\n## Digital twin\ntwin\n### Over the default candidates\nall\n## Cost\nc\n")


def test_the_replay_on_the_twin_offers_a_j_at_the_steps_the_twin_records(bench_path):
    """The twin runs a-j's published clocks at the device's steps and records those: candidates left off
    them were never known as profiled, and the loop proposed the same mode again and again."""
    adaptive_replay = importlib.import_module("adaptive_replay")
    from jetpredict.models.catalogue import load_device

    cands = adaptive_replay.real_rows().drop_duplicates("mode")[["mode", *adaptive_replay.MODE_FIELDS]]
    chooser = adaptive_replay.twin_chooser("agx-xavier", None, adaptive_replay.GOALS[1], 0.12, cands)
    offered, device = chooser.adviser.candidates, load_device("agx-xavier")
    assert list(offered["mode"]) == list("abcdefghij")
    for name, steps in (("cpu_mhz", device.cpu_steps_mhz), ("gpu_mhz", device.gpu_steps_mhz),
                        ("emc_mhz", device.emc_steps_mhz)):
        assert offered[name].isin(steps).all(), name


def _render_isolation_uploads(module, data: dict) -> str:
    # main joins the gated run's report and the ungated one's; the JSON keeps them under these keys.
    return "\n".join(module._markdown(data[run]) for run in ("gated", "ungated"))


#: Stored results with a renderer: (results name, bench module, how the module renders the stored JSON).
RENDERED_RESULTS = [
    ("api_compact", "api_compact", lambda m, d: m._markdown(d)),
    ("api_fleet", "api_fleet", lambda m, d: m._markdown(d)),
    ("api_load", "api_load", lambda m, d: m._markdown(d)),
    ("api_isolation", "api_isolation", lambda m, d: m._markdown(d)),
    ("api_isolation_uploads", "api_isolation", _render_isolation_uploads),
    ("adaptive_replay", "adaptive_replay",
     lambda m, d: m.markdown(d["real"], d["twin"], d["whole_space"], d["cost"], m.TWIN_MINIBATCHES)),
    ("api_fuzz", "api_fuzz", lambda m, d: m.markdown(d)),
    ("api_fuzz_without_rules", "api_fuzz", lambda m, d: m.markdown(d)),
    ("serve_boot", "serve_boot", lambda m, d: m.markdown(d)),
    ("serve_boot_flask", "serve_boot", lambda m, d: m.markdown(d)),
    ("real_cv", "real_cv_report", lambda m, d: m.markdown(
        d["within_device"], d["named_designs"], d["cross_device"], d["leave_one_mode_out"], d["monotone"],
        d["seconds"], d["no_meter"], d["no_components"])),
    ("fit_scaling", "fit_scaling", lambda m, d: m.markdown(d)),
    ("listing_after_upgrade", "listing_after_upgrade", lambda m, d: m.markdown(d)),
]


@pytest.mark.parametrize(("name", "module_name", "render"), RENDERED_RESULTS, ids=[r[0] for r in RENDERED_RESULTS])
def test_each_stored_result_is_what_its_bench_renders_from_its_json(name, module_name, render, bench_path):
    """A stored .md that today's script cannot render from its own JSON is stale (a changed script, a
    hand edit, or a result file no run of it wrote). Its last line, when and at which commit it was
    written, is write_results' own."""
    import json

    stored = BENCH / "results"
    module = importlib.import_module(module_name)
    data = json.loads((stored / f"{name}.json").read_text(encoding="utf-8"))
    text = (stored / f"{name}.md").read_text(encoding="utf-8")
    assert render(module, data) == importlib.import_module("results_io").without_stamp(text)


def test_a_one_client_count_load_run_renders_its_unknown_growth(bench_path):
    """``api_load.py --clients 1`` ran the whole benchmark, then died formatting growth exponents of None
    (TypeError) before printing or writing anything."""
    import json

    api_load = importlib.import_module("api_load")
    res = json.loads((BENCH / "results" / "api_load.json").read_text(encoding="utf-8"))
    res["by_clients"] = res["by_clients"][:1]
    res["growth_exponents"] = dict.fromkeys(res["growth_exponents"])  # what one client count gives
    text = api_load._markdown(res)
    assert "p50 latency ~ clients^n/a (bare n/a), throughput ~ clients^n/a (bare n/a)" in text


def test_the_inline_verdicts_compare_the_right_way(bench_path):
    """The verdicts four benches printed or exited by: each holds the stored run's figures to its target, and
    a figure past the target fails it (an inverted comparison passed every test)."""
    import copy
    import json

    def stored(name: str) -> dict:
        return json.loads((BENCH / "results" / f"{name}.json").read_text(encoding="utf-8"))

    api_fleet, api_load = importlib.import_module("api_fleet"), importlib.import_module("api_load")
    fleet = stored("api_fleet")
    assert api_fleet.met_target(fleet)
    slow = copy.deepcopy(fleet)
    next(r for r in slow["results"] if r["clients"] >= 10_000)["median_s"] = api_fleet.TARGET_S * 1.01
    assert not api_fleet.met_target(slow)
    load = stored("api_load")
    assert api_load.met_targets(load) == (load["throughput_ratio"] >= api_load.THROUGHPUT_RATIO_TARGET
                                          and load["prediction_one_client"]["p50_ms"] < api_load.P50_TARGET_MS)
    assert api_load.met_targets({**load, "throughput_ratio": api_load.THROUGHPUT_RATIO_TARGET,
                                 "prediction_one_client": {**load["prediction_one_client"],
                                                           "p50_ms": api_load.P50_TARGET_MS * 0.99}})
    assert not api_load.met_targets({**load, "throughput_ratio": api_load.THROUGHPUT_RATIO_TARGET * 0.99})
    overhead = importlib.import_module("profiler_overhead")
    measured = stored("profiler_overhead")
    assert overhead.met_target(measured["median_ratio_without_over_with"]) == measured["passed"]
    assert overhead.met_target(overhead.TARGET_RATIO) and not overhead.met_target(overhead.TARGET_RATIO - 0.001)
    predict_speed = importlib.import_module("predict_speed")
    assert [predict_speed.met_text(m, t) for m, t in ((4.9, 5.0), (5.0, 5.0), (1.0, None))] == ["yes", "NO", "-"]


def test_growth_exponent_is_the_log_log_slope_over_every_size(bench_path):
    results_io = importlib.import_module("results_io")
    assert results_io.growth_exponent([(10, 0.5), (100, 5.0), (1_000, 50.0)]) == pytest.approx(1.0)
    assert results_io.growth_exponent([(10, 1.0), (100, 100.0), (1_000, 10_000.0)]) == pytest.approx(2.0)
    assert results_io.growth_exponent([(10, 3.0), (1_000, 3.0)]) == pytest.approx(0.0)
    # A bent curve: the least-squares slope over all three points, not the first pair's (1) or the last's (2).
    assert results_io.growth_exponent([(10, 1.0), (100, 10.0), (1_000, 1_000.0)]) == pytest.approx(1.5)
    # Unusable points (zero or missing cost) are left out; one point has no slope.
    assert results_io.growth_exponent([(10, 1.0), (100, 0.0), (1_000, None), (10_000, 1_000.0)]) == pytest.approx(1.0)
    assert results_io.growth_exponent([(10, 1.0)]) is None
    points = [(10, 5.0), (1_000, 10.0), (10_000, 100.0)]
    overall = np.polyfit(np.log([x for x, _ in points]), np.log([y for _, y in points]), 1)[0]  # about 0.39
    assert results_io.growth_exponents(points, 1_000) == (
        pytest.approx(overall), pytest.approx(1.0))  # the second from from_size on, that size included


def test_cpu_seconds_is_the_median_of_its_runs(bench_path, monkeypatch):
    results_io = importlib.import_module("results_io")
    ticks = iter([0.0, 2.0, 5.0, 6.0])
    assert results_io.run_seconds(lambda: None, 2, clock=lambda: next(ticks)) == [2.0, 1.0]
    monkeypatch.setattr(results_io, "run_seconds", lambda fn, repeats: [1.0, 1.0, 10.0][:repeats])
    assert results_io.cpu_seconds(lambda: None, 3) == 1.0  # one slow run does not move it (a mean reads 4)


def test_write_results_stores_the_text_and_the_data(bench_path, monkeypatch, tmp_path):
    import json

    results_io = importlib.import_module("results_io")
    monkeypatch.setattr(results_io, "RESULTS_DIR", tmp_path / "results")
    path = results_io.write_results("b", "# B\n", {"sizes": [10, 100], "slope": 1.0})
    assert path == tmp_path / "results" / "b.md"
    assert results_io.without_stamp(path.read_text(encoding="utf-8")) == "# B\n"
    assert json.loads((tmp_path / "results" / "b.json").read_text(encoding="utf-8")) == {"sizes": [10, 100],
                                                                                         "slope": 1.0}
    results_io.write_results("text-only", "t")
    assert not (tmp_path / "results" / "text-only.json").exists()


def test_written_results_end_with_the_utc_date_and_the_commit(bench_path, monkeypatch, tmp_path):
    """README quotes dated figures: each .md says when (UTC) and at which commit (``+dirty`` for changes
    outside bench/results) it was written."""
    import subprocess
    from datetime import datetime, timedelta, timezone

    results_io = importlib.import_module("results_io")
    monkeypatch.setattr(results_io, "RESULTS_DIR", tmp_path / "results")
    before = datetime.now(timezone.utc)
    text = results_io.write_results("b", "# B\n").read_text(encoding="utf-8")
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()
    found = re.fullmatch(r"# B\n\nWritten (\d{4}-\d\d-\d\d \d\d:\d\d) UTC at commit (\w+)(\+dirty)?\.\n", text)
    assert found and found[2] == head, text
    when = datetime.strptime(found[1], "%Y-%m-%d %H:%M").replace(tzinfo=timezone.utc)
    assert before - timedelta(minutes=1) < when <= datetime.now(timezone.utc)
    # Dirty only for a tracked file changed outside bench/results; no repository, no commit.
    git = ["git", "-c", "user.name=b", "-c", "user.email=b@b", "-C", str(tmp_path / "repo")]
    (tmp_path / "repo" / "bench" / "results").mkdir(parents=True)
    for name in ("x.py", "bench/results/r.md"):
        (tmp_path / "repo" / name).write_text("1\n", encoding="utf-8")
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "c"]):
        subprocess.run(git + args, check=True, capture_output=True)
    commit = subprocess.run(git + ["rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    noon = datetime(2026, 12, 6, 12, 5, tzinfo=timezone.utc)
    (tmp_path / "repo" / "bench" / "results" / "r.md").write_text("2\n", encoding="utf-8")
    assert results_io.stamp(noon, tmp_path / "repo") == f"Written 2026-12-06 12:05 UTC at commit {commit}."
    (tmp_path / "repo" / "x.py").write_text("2\n", encoding="utf-8")
    assert results_io.stamp(noon, tmp_path / "repo").endswith(f"at commit {commit}+dirty.")
    assert "commit unknown" in results_io.stamp(noon, tmp_path / "results")


def test_mixed_fleet_upload_slopes_span_every_size_and_the_large_ones(bench_path):
    mixed_fleet = importlib.import_module("mixed_fleet")
    uploads = [{"stored_rows": n, "cpu_s": s} for n, s in ((10, 0.1), (100, 0.1), (1_000, 0.1), (5_000, 0.5))]
    b_all, b_large = mixed_fleet.upload_slopes(uploads, "cpu_s")
    overall = np.polyfit(np.log([10, 100, 1_000, 5_000]), np.log([0.1, 0.1, 0.1, 0.5]), 1)[0]  # about 0.21
    assert b_all == pytest.approx(overall) and b_large == pytest.approx(1.0)  # 1,000 rows on, 1,000 included


def test_predict_speed_times_after_a_warm_up_and_prints_the_median(bench_path):
    import time

    predict_speed = importlib.import_module("predict_speed")
    sleeps_s = iter([0.2, 0.0, 0.0, 0.12])  # the first call is the warm-up: slow, and not counted
    calls = []

    def fn():
        calls.append(1)
        time.sleep(next(sleeps_s))

    med_ms, lo_ms, hi_ms, _ = predict_speed.timed(fn, 3)
    assert len(calls) == 4
    assert med_ms < 30 <= 120 <= hi_ms < 200 and lo_ms <= med_ms  # a mean of the three would read >= 40


def test_report_targets_fails_the_run_on_any_missed_target(bench_path, capsys):
    results_io = importlib.import_module("results_io")
    assert results_io.report_targets({"a": True, "b": None}) == 0
    assert results_io.report_targets({"a": True, "b": False}) == 1
    out = capsys.readouterr().out
    assert "target a: met" in out and "target b: NOT met" in out and "target b: not measured" in out


def test_fit_scaling_verdict_holds_each_size_to_its_target(bench_path):
    fit_scaling = importlib.import_module("fit_scaling")
    fast = [{"rows": 1_000, "fit_cpu_s": 0.01}, {"rows": 100_000, "fit_cpu_s": 1.0}]
    assert list(fit_scaling.verdict(fast, 1.0).values()) == [True, True, True]
    slow_small = [{"rows": 1_000, "fit_cpu_s": 0.3}, {"rows": 100_000, "fit_cpu_s": 1.0}]
    assert list(fit_scaling.verdict(slow_small, 1.0).values()) == [False, True, True]
    assert list(fit_scaling.verdict(fast, 1.9).values()) == [True, True, False]  # close to quadratic
    # A quick run's sizes measure no target: none is a miss.
    assert list(fit_scaling.verdict([{"rows": 10, "fit_cpu_s": 5.0}], None).values()) == [None, None, None]


def test_fit_scaling_quick_run_skips_the_cap_and_exits_on_its_targets(bench_path, capsys):
    fit_scaling = importlib.import_module("fit_scaling")
    assert fit_scaling.main(["--sizes", "10,100", "--repeats", "1", "--no-cap"]) == 0
    out = capsys.readouterr().out
    assert "CLI cap: not run (--no-cap)." in out and "not measured in this run" in out
    # Every size asked for is timed, and the near-linear target reads the slope from 1,000 rows on only:
    # 10 and 100 rows give it no slope, whatever the slope over all sizes is.
    assert "      10 rows  fit" in out and "     100 rows  fit" in out
    assert "(b <= 1.2): not measured in this run" in out
    with pytest.raises(SystemExit):  # stored results always hold the cap's figures
        fit_scaling.main(["--no-cap", "--write"])


def test_fit_scaling_stores_the_load_its_cpu_seconds_were_measured_under(bench_path, capsys):
    """Others share the cores: the stored run says the load average it ended at, as its .md does, and a
    run prints it with the cap's sentence the .md repeats."""
    import json

    fit_scaling = importlib.import_module("fit_scaling")
    stored = json.loads((BENCH / "results" / "fit_scaling.json").read_text(encoding="utf-8"))
    assert stored["cpu_count"] >= 1 and stored["load_avg_1m"] >= 0
    text = (BENCH / "results" / "fit_scaling.md").read_text(encoding="utf-8")
    assert f"load average {stored['load_avg_1m']:.1f} at the end" in text
    assert f"CLI cap, {stored['cap_rows']:,} rows: CSV read and checked in {stored['cap_read_cpu_s']:.2f}" in text
    assert fit_scaling.main(["--sizes", "10", "--repeats", "1", "--no-cap"]) == 0
    assert "CPUs, load average " in capsys.readouterr().out


def test_fit_scaling_fits_once_before_it_times_the_first_size(bench_path, monkeypatch, capsys):
    """The first fit loads the bundled reference: timed, it would make the smallest size look slow."""
    fit_scaling = importlib.import_module("fit_scaling")
    real_fit, fitted_rows = fit_scaling.fit_workload, []

    def counting_fit(rows, device):
        if (rows["workload"] == "fit-scaling").all():  # the bench's rows, not synthetic_rows' own reference fit
            fitted_rows.append(len(rows))
        return real_fit(rows, device)

    monkeypatch.setattr(fit_scaling, "fit_workload", counting_fit)
    assert fit_scaling.main(["--sizes", "100", "--repeats", "2", "--no-cap"]) == 0
    assert fitted_rows == [10, 100, 100]  # the warm-up, then the two timed repeats


def test_caps_twin_verdict_misses_on_one_cap_broken(bench_path):
    caps_twin = importlib.import_module("caps_twin")
    rows = [{"cap": "max_power_w=15", "holds": True}, {"cap": "max_epoch_time_s=120", "holds": True}]
    assert list(caps_twin.verdict(rows).values()) == [True, True]
    rows.append({"cap": "max_power_w=30", "holds": False})
    assert list(caps_twin.verdict(rows).values()) == [False, True]
    assert list(caps_twin.verdict(rows[:1]).values()) == [True, None]


def test_adaptive_replay_verdict_misses_on_one_run_past_the_bar(bench_path):
    adaptive_replay = importlib.import_module("adaptive_replay")
    good = {"workload": "w", "objective": "min-time", "start": 1, "stop_modes": 4, "stop_error_pct": 1.0}
    assert list(adaptive_replay.verdict([good]).values()) == [True]
    too_many = {**good, "stop_modes": adaptive_replay.TARGET_MODES + 1}
    too_far = {**good, "stop_error_pct": -100 * adaptive_replay.WITHIN - 0.1}
    for bad in (too_many, too_far, {**good, "stop_modes": None}):
        assert list(adaptive_replay.verdict([good, bad]).values()) == [False]
    assert list(adaptive_replay.verdict([]).values()) == [None]


def test_api_fleet_says_why_it_has_no_growth_below_two_large_sizes(bench_path):
    api_fleet = importlib.import_module("api_fleet")
    res = {"repeats": 1, "host": {"cpus": 2, "load_avg_1m": 0.5},
           "results": [{"clients": n, "median_s": 0.01, "max_s": 0.01, "bytes": 100} for n in (10, 100)]}
    assert "Time ~ clients^b: n/a (needs two sizes >= 100)." in api_fleet._markdown(res)


def test_serve_boot_verdict_holds_the_readme_command_to_the_design_limit(bench_path):
    serve_boot = importlib.import_module("serve_boot")
    boots = [{"workers": serve_boot.DEFAULT, "ok": True, "seconds": s} for s in (2.0, 3.0, 4.0)]
    boots += [{"workers": 4, "ok": True, "seconds": 40.0}]  # a count the README does not run: no target
    result = serve_boot.summarize(boots, [None, 4], default_workers=2)
    assert result["sizes"][0] == {"workers": 2, "flag": False, "boots": 3, "ok": 3, "median_s": 3.0, "max_s": 4.0}
    skewed = serve_boot.summarize([{"workers": serve_boot.DEFAULT, "ok": True, "seconds": s} for s in (2.0, 3.0, 13.0)],
                                  [None], default_workers=2)
    assert skewed["sizes"][0]["median_s"] == 3.0  # the median, as printed (a mean reads 6.0)
    assert list(serve_boot.verdict(result).values()) == [True]
    slow = serve_boot.summarize(boots + [{"workers": serve_boot.DEFAULT, "ok": True, "seconds": 15.5}], [None], 2)
    assert list(serve_boot.verdict(slow).values()) == [False]
    failed = serve_boot.summarize(boots + [{"workers": serve_boot.DEFAULT, "ok": False, "seconds": None}], [None], 2)
    assert list(serve_boot.verdict(failed).values()) == [False]
    assert serve_boot.serve_command(8080, None, "flask")[-5:] == ["serve", "--port", "8080", "--server", "flask"]


def test_serve_boot_grows_with_the_store_it_opens(bench_path):
    """Boots over a store of 10 and 1,000 workloads: their own rows beside the empty folder's, a growth over
    the sizes above 0, and the target over every one of them."""
    serve_boot = importlib.import_module("serve_boot")
    boots = [{"workers": serve_boot.DEFAULT, "ok": True, "seconds": 1.0}]
    boots += [{"workers": serve_boot.DEFAULT, "stored": n, "ok": True, "seconds": s} for n, s in ((10, 1.0), (1_000, 10.0))]
    result = serve_boot.summarize(boots, [None], 2, [10, 1_000])
    assert result["sizes"][0]["boots"] == 1  # the empty folder's boots alone
    assert [(s["stored"], s["median_s"]) for s in result["by_stored"]] == [(0, 1.0), (10, 1.0), (1_000, 10.0)]
    assert result["growth_exponent_stored_median_s"] == pytest.approx(0.5)
    assert list(serve_boot.verdict(result).values()) == [True, True]
    result = serve_boot.summarize(boots + [{**boots[-1], "seconds": 16.0}], [None], 2, [10, 1_000])
    assert list(serve_boot.verdict(result).values()) == [True, False]


def test_the_stored_caps_twin_verdicts_are_those_of_its_table(bench_path):
    caps_twin = importlib.import_module("caps_twin")
    results_io = importlib.import_module("results_io")
    lines = (BENCH / "results" / "caps_twin.md").read_text(encoding="utf-8").splitlines()
    picks = [cells for line in lines if len(cells := [c.strip() for c in line.split("|")[1:-1]]) == 10
             and cells[0] not in ("device", "---")]
    rows = [{"cap": cap, "holds": holds == "yes"} for *_, cap, _, _, _, _, holds, _ in picks]
    assert rows and [f"- {line}" for line in results_io.target_lines(caps_twin.verdict(rows))] == [
        line for line in lines if line.startswith("- target ")]


def _stub_real_cv_scoring(real_cv, monkeypatch, time_coverage_pct: float) -> None:
    """real_cv's scoring, text and extra checks replaced by one summary row whose time coverage (%) is
    given, so main runs its verdict and exit path in a moment."""
    scoring = importlib.import_module("real_cv_scoring")
    row = {"target": "t", "reference": "other real", "modes": 4, "rows_scatter_max_pct": 1.3,
           **{f"{name}_coverage": 95.0 for _, name in scoring.OUTPUTS}, "time_coverage": time_coverage_pct}
    stubs = {"out_of_sample_scales": lambda: {}, "monotone_check": lambda real: [],
             "leave_one_mode_out": lambda real: [], "within_device": lambda real, cases, sizes: [row],
             "error_sources": lambda within: [], "named": lambda real, cases: [], "without_columns": lambda real, label: [],
             "markdown": lambda *a, **k: "", "cost_lines": lambda within: []}
    for name, stub in stubs.items():
        monkeypatch.setattr(real_cv, name, stub)


def test_real_cv_exits_1_when_a_coverage_is_under_the_bar(bench_path, monkeypatch, capsys):
    real_cv = importlib.import_module("real_cv")
    bar = importlib.import_module("real_cv_report").COVERAGE_BAR
    _stub_real_cv_scoring(real_cv, monkeypatch, bar - 1)
    assert real_cv.main(["--no-cross-device"]) == 1
    out = capsys.readouterr().out
    assert "NOT every case" in out
    assert "| t | 1.3% |" in out  # the rows' scatter about their own fit is printed, not only written
    _stub_real_cv_scoring(real_cv, monkeypatch, bar)  # on the bar holds it
    assert real_cv.main(["--no-cross-device"]) == 0


def test_the_committed_real_cv_run_holds_every_coverage_bar(bench_path):
    import json

    report = importlib.import_module("real_cv_report")
    within = json.loads((BENCH / "results" / "real_cv.json").read_text(encoding="utf-8"))["within_device"]
    line, ok = report.coverage_check(within)
    assert ok, line


def _stub_flower_fleet(fleet, monkeypatch, misses: int = 0, empty_rounds: tuple[int, ...] = ()) -> None:
    """The fleet's fitting and runs replaced by fixed per-arm figures (the plan missing its deadline
    ``misses`` times, each arm training nobody in ``empty_rounds``): only the verdict and exit path run."""
    def arm(name: str) -> dict:
        return {"predicted": 10, "trained": 10, "excluded": 0, "late": 0, "misses": misses if name == "plan" else 0,
                "train_energy_j": 100.0, "round_energy_j": 200.0, "accuracy": 0.9, "time_cover": 10,
                "time_upper_cover": 10, "energy_cover": 10, "energy_checked": 10, "empty_rounds": list(empty_rounds)}

    monkeypatch.setattr(fleet, "fit_fleet_models", lambda seed: {})
    monkeypatch.setattr(fleet, "run_setting", lambda models, n, split, deadline, seed, args: {
        "clients": n, "split": split, "deadline_s": deadline, "seed": seed, "wall_s": 1.0, "client_rounds": 40,
        "arms": {a: arm(a) for a in fleet.ARMS}})


@pytest.mark.parametrize(("misses", "empty_rounds", "status"), [(0, (), 0), (3, (), 1), (0, (2,), 1)],
                         ids=["all yes", "plan missed", "round trained nobody"])
def test_flower_fleet_exits_1_on_a_no_or_error_verdict(misses, empty_rounds, status, bench_path, monkeypatch, capsys):
    fleet = importlib.import_module("flower_fleet_bench")
    _stub_flower_fleet(fleet, monkeypatch, misses, empty_rounds)
    assert fleet.main(["--clients", "50", "--splits", "iid", "--deadlines", "10", "--seeds", "2"]) == status
    out = capsys.readouterr().out
    assert ("- NO:" in out or "- ERROR:" in out) == bool(status)


#: The README accuracy table's names of the three real workloads, and their ids.
README_WORKLOADS = {"ResNet-18": "resnet18-cifar10", "MobileNetV3": "mobilenetv3-gld23k", "LeNet-5": "lenet5-mnist"}


def _readme_four_mode_medians() -> dict[str, tuple[float, float]]:
    """Per workload id, the time and energy MAPE medians (%) that the README's accuracy table quotes for 4
    profiled modes (every design, the other two real workloads as reference)."""
    row = re.compile(r"^\| (?P<name>[\w-]+) \| 4 \| (?P<time>[\d.]+)% \([\d.]+%\) \| (?P<energy>[\d.]+)% \(")
    found = [(README_WORKLOADS[m["name"]], (float(m["time"]), float(m["energy"])))
             for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
             if (m := row.match(line)) and m["name"] in README_WORKLOADS]
    assert sorted(w for w, _ in found) == sorted(README_WORKLOADS.values()), "one 4-mode row per real workload"
    return dict(found)


# Not slow: every 4-mode design of the three real workloads (630 fits) is ~11 CPU-s, 16 s wall at load ~4 on 2 cores.
def test_the_readme_headline_accuracy_is_what_the_scoring_gives_today(bench_path, monkeypatch):
    """The README's 4-mode time and energy MAPE medians are the committed run's, and a fresh scoring of
    every 4-mode design stays within 5% of them (the quotes are rounded to 0.1; today's figures lie within
    2.0%): a regression in the fit or the scoring fails here. So do its intervals: under the committed
    run's out-of-sample scales (their calibration alone is ~22 CPU-s more), each coverage holds the bar and
    lies, as each median width, within 3 points of the committed run's, and the power MAPE within 5% of it."""
    import json

    real_cv = importlib.import_module("real_cv")
    report = importlib.import_module("real_cv_report")
    from jetpredict.models.profile_files import read_profile_csv
    from jetpredict.predictor.constants import IntervalScales

    quoted = _readme_four_mode_medians()
    committed = json.loads((BENCH / "results" / "real_cv.json").read_text(encoding="utf-8"))
    stored = {r["target"]: r for r in committed["within_device"] if r["reference"] == "other real" and r["modes"] == 4}
    for target, table in committed["scales"].items():
        monkeypatch.setitem(real_cv.SCALES, target, {int(k): IntervalScales(**v) for k, v in table.items()})
    fresh = {r["target"]: r for r in real_cv.within_device(read_profile_csv(real_cv.REAL_CSV), ("other real",), (4,))}
    for target, (time_pct, energy_pct) in quoted.items():
        assert (f"{stored[target]['time_mape_median']:.1f}", f"{stored[target]['energy_mape_median']:.1f}") == (
            f"{time_pct:.1f}", f"{energy_pct:.1f}"), f"README quotes the committed real_cv run for {target}"
        assert fresh[target]["time_mape_median"] == pytest.approx(time_pct, rel=0.05), target
        assert fresh[target]["energy_mape_median"] == pytest.approx(energy_pct, rel=0.05), target
        assert fresh[target]["power_mape_median"] == pytest.approx(stored[target]["power_mape_median"], rel=0.05)
        for _, name in real_cv.OUTPUTS:
            assert fresh[target][f"{name}_coverage"] >= report.COVERAGE_BAR, (target, name)
            for figure in (f"{name}_coverage", f"{name}_width_median"):
                assert fresh[target][figure] == pytest.approx(stored[target][figure], abs=3.0), (target, figure)
