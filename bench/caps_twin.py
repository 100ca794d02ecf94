"""Do the caps hold? ``recommend`` under power and time caps, checked by running the picks on the twin.

For every device and for ResNet-18 and LeNet-5: profile the default ``plan --budget 4`` on the digital twin
(``jetpredict profile --device sim:DEVICE``), fit, then

- ``recommend --objective min-time --max-power-w X`` at each preset's power budget X;
- ``recommend --objective min-energy --max-epoch-time-s T`` at T = 1.25 x and 2 x the fastest mode's
  predicted upper time bound;

and profile each picked mode on the twin, which can measure any mode. A cap holds when the measured
power (time) is within it; the targets, every power cap and every time cap held, print met / NOT met,
and the run exits 1 on a miss. Simulated: this checks the plumbing of "caps are met with the interval" and
the twin's agreement with the model, not accuracy on hardware (``tests/predictor/test_recommend.py``
asserts the power half on every device).

Cost: CPU seconds of one ``recommend`` against the device's number of modes (printed with its growth).

Run: ``python bench/caps_twin.py [--write]`` (about a minute); ``--write`` writes
``bench/results/caps_twin.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import sys
import tempfile
from functools import partial
from pathlib import Path

import pandas as pd

sys.path[:0] = [str(Path(__file__).resolve().parent.parent)]
from jetpredict.models.catalogue import MODE_FIELDS, PowerMode, device_ids, load_device  # noqa: E402
from jetpredict.models.profile_files import read_profile_csv  # noqa: E402
from jetpredict.predictor import service  # noqa: E402
from jetpredict.predictor.bundled import fit_workload  # noqa: E402
from jetpredict.predictor.reference import REFERENCE_DIR  # noqa: E402
from jetpredict.profiler.sim import workload_complexity  # noqa: E402
from jetpredict.profiler.sim.kernel_costs import cached_workloads  # noqa: E402
from jetpredict.profiler.sim.twin import DevicePhysics, Twin  # noqa: E402
from results_io import (  # noqa: E402
    exponent_text,
    growth_exponent,
    report_targets,
    target_lines,
    timed,
    write_results,
)

from jetpredict.cli import main as cli  # noqa: E402

WORKLOADS = ("resnet18-cifar10", "lenet5-mnist")
TIME_CAP_FACTORS = (1.25, 2.0)


def twin(device_id: str, workload: str, modes: pd.DataFrame, tmp: Path, name: str) -> pd.DataFrame:
    """Profile rows of ``modes`` measured by the twin (through the command line users run)."""
    modes_csv, out = tmp / f"{name}-modes.csv", tmp / f"{name}.csv"
    modes[["mode", *MODE_FIELDS]].to_csv(modes_csv, index=False)
    with contextlib.redirect_stderr(io.StringIO()):
        rc = cli(["profile", "--device", f"sim:{device_id}", "--workload", workload, "--modes", str(modes_csv),
                  "--out", str(out), "--no-progress"])
    if rc != 0:
        raise RuntimeError(f"twin profile of {workload} on {device_id} failed ({rc})")
    return read_profile_csv(out)


def check_device(device_id: str, tmp: Path, recommend_cpu_s: list[float] | None = None) -> list[dict]:
    """Every cap check of ``device_id``; ``recommend_cpu_s`` collects the CPU seconds of each ``recommend``
    (over all the device's modes)."""
    device = load_device(device_id)
    plan = service.plan_profiling(device, 4).modes
    budgets = device.power_caps_w()
    out = []
    for workload in WORKLOADS:
        model = fit_workload(twin(device_id, workload, plan, tmp, f"{device_id}-{workload}-plan"))
        fastest = float(service.predict(model, "all")["epoch_time_s_high"].min())
        asks = [("min-time", {"max_power_w": x}, "max_power_w", x) for x in budgets]
        asks += [("min-energy", {"max_epoch_time_s": f * fastest}, "max_epoch_time_s", f * fastest)
                 for f in TIME_CAP_FACTORS]
        picks = []
        for objective, limits, cap_name, cap in asks:
            r, cpu_s = timed(partial(service.recommend, model, objective, **limits))
            if recommend_cpu_s is not None:
                recommend_cpu_s.append(cpu_s)
            if r.best is not None:
                picks.append({**r.best, "mode": f"pick{len(picks)}", "objective": objective, "cap_name": cap_name,
                              "cap": cap, "picked": r.best["mode"]})
        measured = twin(device_id, workload, pd.DataFrame(picks), tmp, f"{device_id}-{workload}-picks")
        for pick, (_, row) in zip(picks, measured.iterrows(), strict=True):
            key = "avg_power_w" if pick["cap_name"] == "max_power_w" else "epoch_time_s"
            out.append({"device": device_id, "workload": workload, "objective": pick["objective"],
                        "cap": f"{pick['cap_name']}={pick['cap']:.4g}", "mode": pick["picked"],
                        "predicted": pick[key], "upper": pick[f"{key}_high"], "measured": float(row[key]),
                        "holds": float(row[key]) <= pick["cap"], "extrapolated": pick["extrapolated_knobs"]})
    return out


def preset_lines() -> list[str]:
    """The twin's presets (noise-free epoch means): the most any cached workload draws against the preset's
    budget; the gated presets against the custom mode at their clocks; and a fit's prediction of Orin NX 15W
    (gated) from ungated modes and with gated presets among the profiled ones (docs/digital-twin.md, E14)."""
    lines = ["## Presets on the twin (simulated)", "",
             "Noise-free epoch means of every cached workload at each preset: the most power any draws, against "
             "the preset's nvpmodel budget.", "",
             "| device | preset | GPU share | budget W | most W (workload) | most / budget |", "|---|---|---|---|---|---|"]
    gated = []
    for device_id in device_ids():
        device = load_device(device_id)
        twins = {w: Twin(DevicePhysics(device), workload_complexity(w)) for w in cached_workloads()}
        for preset in device.presets:
            power = {w: float(tw.epoch(preset)["avg_power_w"][0]) for w, tw in twins.items()}
            top = max(power, key=power.get)
            budget = preset.power_budget_w
            lines.append(f"| {device_id} | {preset.mode} | {preset.gpu_share:g} | {budget or '-'} | "
                         f"{power[top]:.2f} ({top}) | {f'{power[top] / budget:.2f}' if budget else '-'} |")
            if preset.gpu_share < 1.0:
                custom = PowerMode("custom", *preset.knobs())
                ratio = {w: (twins[w].epoch(preset), twins[w].epoch(custom)) for w in ("resnet18-cifar10", "lenet5-mnist")}
                gated.append((device_id, preset, {w: (g["epoch_time_s"][0] / c["epoch_time_s"][0],
                                                      g["avg_power_w"][0] / c["avg_power_w"][0])
                                                  for w, (g, c) in ratio.items()}))
    lines += ["", "Gated presets against the custom mode at their clocks (the whole GPU): time and power ratios.", "",
              "| device | preset | GPU share | ResNet-18 time x | ResNet-18 power x | LeNet-5 time x |",
              "|---|---|---|---|---|---|"]
    lines += [f"| {d} | {p.mode} | {p.gpu_share:g} | {r['resnet18-cifar10'][0]:.2f} | {r['resnet18-cifar10'][1]:.2f} | "
              f"{r['lenet5-mnist'][0]:.2f} |" for d, p, r in gated]
    sweep = read_profile_csv(REFERENCE_DIR / "orin-nx-simulated.csv")
    sweep = sweep[sweep["workload"] == "resnet18-cifar10"].reset_index(drop=True)
    measured = float(sweep.loc[sweep["mode"] == "15W", "epoch_time_s"].iloc[0])
    fits = {"4 ungated modes": sweep[~sweep["mode"].isin(["10W", "15W"])].iloc[[0, 3, 30, 60]],
            "gated 10W among them": sweep[sweep["mode"].isin(["MAXN", "10W", "25W"])]}
    lines += ["", f"ResNet-18 on Orin NX 15W (gated; the twin's sweep: {measured:.0f} s), fitted on the twin's rows:", "",
              "| profiled | predicted s | flagged |", "|---|---|---|"]
    for name, rows in fits.items():
        pred = service.predict(fit_workload(rows), "presets").set_index("mode").loc["15W"]
        lines.append(f"| {name} ({', '.join(rows['mode'])}) | {pred['epoch_time_s']:.0f} | "
                     f"{pred['extrapolated_knobs'] or '-'} |")
    return lines + [""]


#: The kinds of cap checked, by the prefix of their ``cap`` text.
CAP_KINDS = {"power": "max_power_w", "time": "max_epoch_time_s"}


def verdict(rows: list[dict]) -> dict[str, bool | None]:
    """The bench's targets: every pick holds its power cap, and every pick its time cap, measured on the twin
    (``rows``: one dict per pick with ``cap`` and ``holds``); None for a kind without a pick."""
    out: dict[str, bool | None] = {}
    for kind, prefix in CAP_KINDS.items():
        held = [bool(r["holds"]) for r in rows if str(r["cap"]).startswith(prefix)]
        out[f"{kind} caps hold at every pick ({sum(held)} of {len(held)})"] = all(held) if held else None
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write bench/results/caps_twin.md")
    args = parser.parse_args(argv)
    rows: list[dict] = []
    cost: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        for device_id in device_ids():
            recommend_s: list[float] = []
            rows += check_device(device_id, Path(tmp), recommend_s)
            cost.append({"device": device_id, "modes": len(load_device(device_id).modes()),
                         "recommends": len(recommend_s), "recommend_cpu_s": statistics.median(recommend_s)})
    df = pd.DataFrame(rows)
    lines = ["# Caps on the digital twin (simulated; generated by `python bench/caps_twin.py --write`)", "",
             "Default 4-mode plan profiled on the twin; each pick of `recommend` run on the twin. Power caps: each "
             "preset's budget, objective min-time; time caps: 1.25x and 2x the fastest predicted upper bound, "
             "objective min-energy. 90% intervals; the cap is checked against their upper end.", "",
             "| device | workload | objective | cap | picked mode | predicted | upper bound | measured (twin) | "
             "holds | extrapolated knobs |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['device']} | {r['workload']} | {r['objective']} | {r['cap']} | {r['mode']} | "
                     f"{r['predicted']:.4g} | {r['upper']:.4g} | {r['measured']:.4g} | "
                     f"{'yes' if r['holds'] else 'NO'} | {r['extrapolated'] or '-'} |")
    power = df[df["cap"].str.startswith(CAP_KINDS["power"])]
    times = df[df["cap"].str.startswith(CAP_KINDS["time"])]
    lines += ["", f"Power caps held in {int(power['holds'].sum())} of {len(power)} picks; time caps in "
              f"{int(times['holds'].sum())} of {len(times)}.", ""]
    lines += [f"- {line}" for line in target_lines(verdict(rows))] + [""]
    cost.sort(key=lambda c: c["modes"])
    growth = growth_exponent((c["modes"], c["recommend_cpu_s"]) for c in cost)
    lines += ["## Cost against the device's modes", "",
              "CPU seconds of one `recommend` over all of a device's modes (median of the device's calls above; each "
              "predicts every mode and the presets, then chooses).", "",
              "| device | modes | recommends | CPU s (median) |", "|---|---|---|---|"]
    lines += [f"| {c['device']} | {c['modes']:,} | {c['recommends']} | {c['recommend_cpu_s']:.3f} |" for c in cost]
    lines += ["", f"Growth: recommend CPU s ~ modes^{exponent_text(growth)}.", ""] + preset_lines()
    text = "\n".join(lines)
    print(text)
    if args.write:
        write_results("caps_twin", text)
    return report_targets(verdict(rows))


if __name__ == "__main__":
    raise SystemExit(main())
