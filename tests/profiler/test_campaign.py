"""Campaign: modes in turn, incremental output, a crash keeps finished modes, fake Jetson, upload."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import numpy as np
import pytest
import torch
from fakes import CloseCountingMeter
from jetpredict.models.catalogue import MODE_FIELDS, PowerMode, load_device
from jetpredict.models.errors import InputError, ModeOutOfRangeError
from jetpredict.models.profile_files import read_profile_csv, read_profile_rows
from jetpredict.profiler import campaign, upload
from jetpredict.profiler.backends import MinibatchTiming, TorchBackend
from jetpredict.profiler.campaign import CampaignConfig, CampaignParts, run_campaign
from jetpredict.profiler.mode_lists import modes_to_profile
from jetpredict.profiler.power import NullPowerMeter, PowerTrace
from jetpredict.profiler.powermode import detect_controller
from jetpredict.profiler.runner import RealTimeRunner

pytestmark = pytest.mark.usefixtures("torch_one_thread")


#: Why a sidecar note says the board set a clock otherwise than asked: true of a custom mode's step, a preset
#: cap's step below it, the top EMC step of a conf with no EMC cap, and a board preset's own cap.
WHY = "(the step of its frequency table it runs at, or its own preset's cap)"


def _cfg(tmp_path, name="p.csv", **kw) -> CampaignConfig:
    base = dict(device="host", workload="lenet5-mnist", out=tmp_path / name, modes="1", batch_size=8,
                workers=0, warmup=1, minibatches=3, progress=False)
    return CampaignConfig(**{**base, **kw})


@pytest.mark.slow
def test_host_campaign_writes_rows_and_raw_json(tmp_path):
    rows = run_campaign(_cfg(tmp_path))
    assert torch.get_num_threads() == 1  # the host controller restored the thread count
    df = read_profile_csv(tmp_path / "p.csv")
    assert len(df) == 1 and len(rows) == 1
    row = df.iloc[0]
    assert row["device"] == "host" and row["cpu_cores"] == 1 and row["minibatches_per_epoch"] == 7500
    assert row["stall_time_s"] > 0 and row["compute_time_s"] > 0
    # Extra columns come back from CSV as text: the shared reader types only the DESIGN.md columns.
    assert row["epoch_time_s"] == pytest.approx(float(row["mb_total_s_mean"]) * 7500)
    assert row["epoch_energy_j"] != row["epoch_energy_j"]  # NaN: unknown, not 0
    assert row["power_null_reason"].startswith("none:")
    assert int(row["macs_fwd"]) == 448_662 and int(row["kernel_count"]) > 0
    assert float(row["cpu_s_per_sample"]) > 0
    doc = json.loads((tmp_path / "p.csv.json").read_text())
    assert doc["format"] == campaign.JSON_FORMAT and doc["complexity"]["params"] == 61_706
    mode = doc["modes"][0]
    assert len(mode["warmup"]["total_s"]) == 1 and len(mode["minibatches"]["total_s"]) == 3
    starts = mode["minibatches"]["start_s"]
    assert starts == sorted(starts) and starts[0] >= 0  # seconds since the campaign started
    assert mode["power"] is None
    assert len(read_profile_rows(tmp_path / "p.csv.json")) == 1


def test_json_out_is_one_document(tmp_path):
    run_campaign(_cfg(tmp_path, name="run.json", minibatches=2))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]
    assert read_profile_rows(tmp_path / "run.json").iloc[0]["minibatches_measured"] in (2, "2")


def test_bad_counts_are_rejected_before_anything_runs(tmp_path):
    for field, value in (("minibatches", 0), ("warmup", -1), ("settle_s", -1.0)):
        with pytest.raises(InputError) as err:
            run_campaign(_cfg(tmp_path, **{field: value}))
        assert err.value.field == field
    with pytest.raises(InputError) as err:
        run_campaign(_cfg(tmp_path, device="raspberry"))
    assert err.value.field == "device"
    with pytest.raises(InputError) as err:
        run_campaign(_cfg(tmp_path, modes="999"))
    assert err.value.field == "modes"
    assert not (tmp_path / "p.csv").exists()


def test_too_many_workers_are_refused_before_any_mode_is_switched(tmp_path, monkeypatch):
    from jetpredict.profiler.sim.controller import SimulatedController

    switched: list[object] = []
    monkeypatch.setattr(SimulatedController, "apply", lambda self, mode: switched.append(mode))
    with pytest.raises(InputError, match="--workers must be <= 1024") as err:
        run_campaign(_cfg(tmp_path, device="sim:orin-nx", modes=None, workers=2000))
    assert err.value.field == "workers" and switched == []
    assert not (tmp_path / "p.csv").exists()


class CrashOnSecondMode(TorchBackend):
    """A real backend that fails when the second mode starts, as a crash mid-campaign would; it counts its
    closes (each releases the DataLoader's workers)."""

    def __init__(self, *a, **kw) -> None:
        super().__init__(*a, **kw)
        self.prepared = self.closed = 0

    def close(self) -> None:
        self.closed += 1
        super().close()

    def prepare(self, mode) -> None:
        self.prepared += 1
        if self.prepared == 2:
            raise RuntimeError("simulated crash in mode 2")
        super().prepare(mode)


def test_a_crash_loses_only_the_mode_in_progress(tmp_path):
    cfg = _cfg(tmp_path)
    nan = float("nan")
    modes = [PowerMode("first", 1, nan, nan, nan), PowerMode("second", 1, nan, nan, nan)]
    runner = RealTimeRunner(CrashOnSecondMode("lenet5-mnist", 8, 0), NullPowerMeter())
    parts = CampaignParts("host", None, modes, runner, detect_controller("host"), 0.0)
    with pytest.raises(RuntimeError, match="simulated crash"):
        run_campaign(cfg, parts)
    df = read_profile_csv(tmp_path / "p.csv")
    assert list(df["mode"]) == ["first"]
    assert [m["mode"] for m in json.loads((tmp_path / "p.csv.json").read_text())["modes"]] == ["first"]
    assert runner.backend.closed == 1  # released although the campaign failed


class HeldByAnotherRun:
    """A controller that refuses to start, as when another jetpredict run is changing power modes."""

    def __enter__(self):
        from jetpredict.profiler.powermode.privileged import PrivilegedCommandError

        raise PrivilegedCommandError("another jetpredict run (pid 1) is changing power modes on this device")

    def __exit__(self, *exc) -> None:
        return None


def _host_parts(backend, *labels: str, controller=None) -> CampaignParts:
    nan = float("nan")
    modes = [PowerMode(label, 1, nan, nan, nan) for label in labels]
    runner = RealTimeRunner(backend, NullPowerMeter())
    return CampaignParts("host", None, modes, runner, controller or detect_controller("host"), 0.0)


def _fail_before_the_first_row(cfg: CampaignConfig) -> None:
    parts = _host_parts(TorchBackend("lenet5-mnist", 8, 0), "refused", controller=HeldByAnotherRun())
    with pytest.raises(RuntimeError, match="another jetpredict run"):
        run_campaign(cfg, parts)


def test_the_campaign_closes_its_meters_on_every_exit(tmp_path):
    meters = [CloseCountingMeter(), CloseCountingMeter()]
    parts = _host_parts(CrashOnSecondMode("lenet5-mnist", 8, 0), "one")  # one mode: it does not crash
    parts.runner = RealTimeRunner(parts.backend, *meters)
    run_campaign(_cfg(tmp_path, minibatches=2), parts)
    assert [m.closes for m in meters] == [1, 1] and parts.backend.closed == 1
    # A campaign that fails before its first mode (an unwritable --out) closes them too.
    meters = [CloseCountingMeter(), CloseCountingMeter()]
    parts = _host_parts(TorchBackend("lenet5-mnist", 8, 0), "one")
    parts.runner = RealTimeRunner(parts.backend, *meters)
    (tmp_path / "file").write_text("not a folder\n")
    with pytest.raises(InputError, match="cannot write --out"):
        run_campaign(_cfg(tmp_path, name="file/p.csv"), parts)
    assert [m.closes for m in meters] == [1, 1]


def test_a_read_back_clock_may_be_a_megahertz_off_but_not_a_core_short():
    """A clock read back within READ_BACK_TOLERANCE_MHZ of its cap is not noted, one further off is; a core
    count is whole, so one core short is noted."""
    asked, tol = PowerMode("m", 4, 1000.0, 500.0, 1000.0), campaign.READ_BACK_TOLERANCE_MHZ
    assert campaign._read_back_notes(asked, PowerMode("rb", 4, 1000.0 + tol, 500.0 - tol, 1000.0)) == []
    off = campaign._read_back_notes(asked, PowerMode("rb", 4, 1000.0, 500.0 - 1.5 * tol, 1000.0))
    assert len(off) == 1 and off[0].startswith(f"read-back gpu_mhz {500.0 - 1.5 * tol:g} differs from the")
    short = campaign._read_back_notes(asked, PowerMode("rb", 3, 1000.0, 500.0, 1000.0))
    assert len(short) == 1 and short[0].startswith("read-back cpu_cores 3 differs from the requested 4")


def test_sidecar_times_are_seconds_since_the_campaign_started():
    """Minibatch start and end stamps and power sample times count from the campaign's start (1000 s on the
    runner's clock here); durations are as they are."""
    cols = campaign._timings_json([MinibatchTiming(0.1, 0.2, 0.3, 1000.5, 1000.8)], 1000.0)
    assert cols == {"stall_s": [0.1], "compute_s": [0.2], "total_s": [0.3], "start_s": [0.5],
                    "end_s": [pytest.approx(0.8)]}
    trace = PowerTrace(np.array([1000.0, 1000.5]), np.array([5.0, 5.0]), meter_name="m")
    assert campaign._trace_json(trace, 1000.0)["times_s"] == [0.0, 0.5]


def test_a_run_that_fails_before_its_first_row_keeps_the_existing_outputs(tmp_path):
    csv, sidecar = tmp_path / "p.csv", tmp_path / "p.csv.json"
    csv.write_text("earlier,rows\n1,2\n")
    sidecar.write_text('{"earlier": true}\n')
    _fail_before_the_first_row(_cfg(tmp_path))
    assert csv.read_text() == "earlier,rows\n1,2\n"
    assert sidecar.read_text() == '{"earlier": true}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.csv", "p.csv.json"]  # no temporary left


def _csv_modes(path) -> list[str]:
    """The mode column as written; no row validation: the test's modes share knobs but not timings."""
    import csv

    with open(path, newline="", encoding="utf-8") as f:
        return [row["mode"] for row in csv.DictReader(f)]


class FailedRunDuringSecondMode(TorchBackend):
    """A backend that, as each mode starts, records the CSV on disk; at the second mode a second campaign
    with the same --out fails before its first row (as a concurrent run refused the power modes would)."""

    def __init__(self, cfg: CampaignConfig, *a, **kw) -> None:
        super().__init__(*a, **kw)
        self.cfg, self.seen = cfg, []

    def prepare(self, mode) -> None:
        text = self.cfg.out.read_text()
        self.seen.append(text if "earlier" in text else _csv_modes(self.cfg.out))
        if mode.mode == "second":
            _fail_before_the_first_row(self.cfg)
        super().prepare(mode)


def test_the_csv_after_each_mode_holds_every_row_so_far(tmp_path):
    cfg = _cfg(tmp_path, minibatches=2)
    (tmp_path / "p.csv").write_text("an,earlier,campaign\n")
    backend = FailedRunDuringSecondMode(cfg, "lenet5-mnist", 8, 0)
    run_campaign(cfg, _host_parts(backend, "first", "second", "third"))
    # The earlier file stays until the first row replaces it; the failed run in between deletes nothing.
    assert backend.seen == ["an,earlier,campaign\n", ["first"], ["first", "second"]]
    assert _csv_modes(tmp_path / "p.csv") == ["first", "second", "third"]
    doc = json.loads((tmp_path / "p.csv.json").read_text())
    assert [m["mode"] for m in doc["modes"]] == ["first", "second", "third"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.csv", "p.csv.json"]


def test_modes_presets_labels_and_files(tmp_path):
    nano = load_device("orin-nano")
    assert [m.mode for m in modes_to_profile(nano, None)] == [p.mode for p in nano.presets]
    picked = modes_to_profile(nano, "7W, 4c-1510.4-624.75-2133")
    assert picked[0].mode == "7W" and picked[1].cpu_cores == 4 and picked[1].gpu_mhz == 624.75
    with pytest.raises(ModeOutOfRangeError) as err:
        modes_to_profile(nano, "4c-1510.4-9999-2133")
    assert err.value.field == "gpu_mhz"
    with pytest.raises(InputError, match="no preset"):
        modes_to_profile(nano, "MAXN_TURBO")
    f = tmp_path / "modes.csv"
    f.write_text("mode,cpu_cores,cpu_mhz,gpu_mhz,emc_mhz\nslow,2,729.6,306,2133\n,6,1510.4,624.75,2133\n")
    modes = modes_to_profile(nano, str(f))
    assert [m.mode for m in modes] == ["slow", "6c-1510.4-624.75-2133"]
    f.write_text("mode,cpu_cores,cpu_mhz,gpu_mhz,emc_mhz\nbad,99,729.6,306,2133\n")
    with pytest.raises(InputError, match="line 2") as err:
        modes_to_profile(nano, str(f))
    assert err.value.field == "cpu_cores"
    f.write_text("mode,cpu_cores,cpu_mhz,gpu_mhz,emc_mhz\nslow,2,729.6,306,2133\n\nbad,99,729.6,306,2133\n")
    with pytest.raises(InputError, match="line 4"):  # the blank line counts: the line an editor shows
        modes_to_profile(nano, str(f))


def test_a_modes_file_row_naming_a_preset_must_have_its_knobs(tmp_path):
    nx = load_device("orin-nx")
    maxn = nx.preset("MAXN")
    f = tmp_path / "modes.csv"
    knobs = ",".join(f"{v:g}" for v in maxn.knobs())
    f.write_text(f"mode,cpu_cores,cpu_mhz,gpu_mhz,emc_mhz\nmaxn,{knobs}\n")  # the preset itself: kept
    assert [m.knobs() for m in modes_to_profile(nx, str(f))] == [maxn.knobs()]
    f.write_text("mode,cpu_cores,cpu_mhz,gpu_mhz,emc_mhz\nslow,2,1190.4,408,2133\nMAXN,2,1190.4,408,2133\n")
    with pytest.raises(InputError, match=r"line 3: mode 'MAXN' names a preset of orin-nx whose knobs") as err:
        modes_to_profile(nx, str(f))
    assert err.value.field == "mode" and "must have the preset's knobs" in err.value.message


def test_a_modes_file_row_naming_a_preset_may_have_the_clocks_its_caps_run_at(tmp_path):
    """A profile row of AGX Xavier MODE_10W records the CPU at 1190.4 and the GPU at 420.75 MHz (its 1200 and
    520 caps at the steps below): a modes file made from such rows names the preset at those clocks, and that
    is the preset."""
    agx = load_device("agx-xavier")
    f = tmp_path / "modes.csv"
    f.write_text("mode,cpu_cores,cpu_mhz,gpu_mhz,emc_mhz\nMODE_10W,2,1190.4,420.75,1065.6\n")
    assert [(m.mode, m.knobs()) for m in modes_to_profile(agx, str(f))] == [("MODE_10W", (2, 1190.4, 420.75, 1065.6))]
    f.write_text("mode,cpu_cores,cpu_mhz,gpu_mhz,emc_mhz\nMODE_10W,2,1190.4,522.75,1065.6\n")  # no MODE_10W runs it
    with pytest.raises(InputError, match="names a preset of agx-xavier whose knobs"):
        modes_to_profile(agx, str(f))


def test_jetson_campaign_on_a_fake_orin_nano(fake_root, tmp_path):
    nano = load_device("orin-nano")
    fake_root.add_jetson(nano)
    fake_root.add_ina3221_hwmon("1-0040", 1, [("VDD_IN", 5000, 1600), ("VDD_CPU_GPU_CV", 1000, 500),
                                              ("VDD_SOC", 1000, 300)])
    status = fake_root.read("/var/lib/nvpmodel/status")
    cfg = _cfg(tmp_path, device="jetson", modes="15W,7W", settle_s=0.0, idle_s=0.25, hz=50.0,
               minibatches=4)
    rows = run_campaign(cfg)
    assert [r["mode"] for r in rows] == ["15W", "7W"]
    for r, preset in zip(rows, (nano.preset("15W"), nano.preset("7W")), strict=True):
        assert r["device"] == "orin-nano" and r["power_meter"].startswith("ina3221")
        assert r["cpu_cores"] == preset.cpu_cores
        assert r["gpu_mhz"] == pytest.approx(preset.gpu_mhz, abs=1.0)
        assert r["base_power_w"] == pytest.approx(8.0)      # 5 V x 1.6 A while idle
        assert r["utilisation"] is not None and r["utilisation"] > 0
    assert fake_root.read("/var/lib/nvpmodel/status") == status  # the original mode is back
    assert any(c[:2] == ["nvpmodel", "-m"] for c in fake_root.calls())


def test_cpu_training_beside_an_nvidia_gpu_does_not_record_gpu_power(fake_root, tmp_path, monkeypatch):
    from test_power_nvml import fake_pynvml

    # NVML answers (a GPU is there) but training runs on the CPU: GPU 0's power is not the training energy.
    monkeypatch.setattr("jetpredict.profiler.power.nvml._load_pynvml", lambda: fake_pynvml())
    monkeypatch.setattr(TorchBackend, "accelerator", lambda self: "cpu")
    monkeypatch.setenv("PATH", str(fake_root.bin))  # no tegrastats either
    parts = campaign._host_parts(_cfg(tmp_path))
    meter = parts.runner.meter
    assert not meter.name.startswith("nvml") and meter.domain != "gpu"
    assert any("CPU training" in t for t in meter.tried)


def test_rows_carry_the_mode_caps_not_an_idle_read_back(fake_root, tmp_path):
    """On a real board devfreq idles below a preset's cap right after the switch: the row records the mode's
    knobs; the idle read-back goes to the sidecar only, with a note."""
    nano = load_device("orin-nano")
    fake_root.add_jetson(nano)
    fake_root.idle_clocks()
    preset = nano.preset("7W")
    rows = run_campaign(_cfg(tmp_path, device="jetson", modes="7W", settle_s=0.0, idle_s=0.0, minibatches=2,
                             lock_clocks=False))  # under the governors: --no-lock-clocks
    assert {k: rows[0][k] for k in ("mode", "cpu_cores", "cpu_mhz", "gpu_mhz", "emc_mhz")} == {
        "mode": "7W", "cpu_cores": preset.cpu_cores, "cpu_mhz": preset.cpu_mhz, "gpu_mhz": preset.gpu_mhz,
        "emc_mhz": preset.emc_mhz}
    mode = json.loads((tmp_path / "p.csv.json").read_text())["modes"][0]
    assert mode["requested"]["gpu_mhz"] == preset.gpu_mhz
    assert mode["read_back"]["gpu_mhz"] == min(nano.gpu_steps_mhz) < preset.gpu_mhz  # idle, below the cap
    assert mode["read_back"]["cpu_mhz"] == min(nano.cpu_steps_mhz) < preset.cpu_mhz
    notes = [n for n in mode["notes"] if n.startswith("read-back")]
    assert [n.split()[1] for n in notes] == ["cpu_mhz", "gpu_mhz"]
    assert campaign.UNLOCKED_CLOCKS_NOTE in mode["notes"]
    assert json.loads((tmp_path / "p.csv.json").read_text())["config"]["lock_clocks"] is False
    tools = [c[:2] for c in fake_root.calls() if c[0] == "jetson_clocks" or c[:2] == ["nvpmodel", "-m"]]
    assert tools == [["nvpmodel", "-m"], ["nvpmodel", "-m"]]  # the switch and the restore; no jetson_clocks


def test_a_preset_row_records_the_boards_own_caps(fake_root, tmp_path):
    """A board whose nvpmodel.conf caps a preset otherwise than the catalogue (another JetPack release):
    the row records what the switch set there, and the sidecar says how the two differ."""
    xavier = load_device("agx-xavier")
    fake_root.add_jetson(xavier)
    catalogue = xavier.preset("MODE_15W")
    board_gpu_mhz = 522.75  # a GPU step below the catalogue's 670 MHz cap
    conf = fake_root.read("/etc/nvpmodel.conf")
    head, tail = conf.split("NAME=MODE_15W >", 1)
    section, rest = tail.split("< POWER_MODEL", 1)
    section = section.replace(f"GPU MAX_FREQ {round(catalogue.gpu_mhz * 1e6)}", f"GPU MAX_FREQ {round(board_gpu_mhz * 1e6)}")
    fake_root.write("/etc/nvpmodel.conf", head + "NAME=MODE_15W >" + section + "< POWER_MODEL" + rest)
    rows = run_campaign(_cfg(tmp_path, device="jetson", modes="MODE_15W", settle_s=0.0, idle_s=0.0, minibatches=2))
    # CPU: the file's 1200 MHz cap runs at the 1190.4 MHz step below it.
    assert (rows[0]["mode"], rows[0]["gpu_mhz"], rows[0]["cpu_mhz"]) == ("MODE_15W", board_gpu_mhz, 1190.4)
    mode = json.loads((tmp_path / "p.csv.json").read_text())["modes"][0]
    assert [n for n in mode["notes"] if n.startswith("the board")] == [
        f"the board set MODE_15W's {k} to {v:g}, not the {getattr(catalogue, k):g} asked {WHY}; the row records "
        f"{v:g}" for k, v in (("cpu_mhz", 1190.4),
                                                                            ("gpu_mhz", board_gpu_mhz))]


def test_a_preset_row_records_the_steps_its_caps_run_at(fake_root, tmp_path):
    """AGX Xavier's MODE_15W caps CPU 1200 / GPU 670 MHz, between the board's steps: the kernel runs each at
    the step below (1190.4, 624.75), which the row records with a sidecar note; MAXN's caps are steps."""
    xavier = load_device("agx-xavier")
    fake_root.add_jetson(xavier)
    rows = run_campaign(_cfg(tmp_path, device="jetson", modes="MODE_15W,MAXN", settle_s=0.0, idle_s=0.0,
                             minibatches=2))
    knobs = [tuple(r[k] for k in ("mode", "cpu_cores", "cpu_mhz", "gpu_mhz", "emc_mhz")) for r in rows]
    assert knobs == [("MODE_15W", 4, 1190.4, 624.75, 1331.2), ("MAXN", *xavier.preset("MAXN").knobs())]
    notes = [[n for n in m["notes"] if n.startswith("the board")]
             for m in json.loads((tmp_path / "p.csv.json").read_text())["modes"]]
    assert notes == [[
        f"the board set MODE_15W's {k} to {v:g}, not the {asked:g} asked {WHY}; the row records {v:g}"
        for k, v, asked in (("cpu_mhz", 1190.4, 1200),
                                                                       ("gpu_mhz", 624.75, 670))], []]


@pytest.mark.parametrize("via", ["sysfs", "nvpmodel"])
def test_an_off_step_mode_row_records_the_steps_the_board_was_set_to(fake_root, tmp_path, via):
    """AGX Xavier has no 1200 MHz CPU nor 1000 MHz GPU step: pinned through sysfs or a custom nvpmodel mode
    (`profile --device jetson`'s), the board runs 1190.4 and 1032.75, which the row records (the sidecar says
    so); a mode on the steps is recorded as asked."""
    from dataclasses import replace

    from jetpredict.profiler.powermode import NvpmodelController, SysfsController

    xavier = load_device("agx-xavier")
    fake_root.add_jetson(xavier)
    cfg = _cfg(tmp_path, device="jetson", modes="4c-1200-1000-1331.2,4c-1036.8-905.25-1331.2", settle_s=0.0,
               idle_s=0.0, minibatches=2)
    parts = campaign.build_parts(cfg)
    if via == "sysfs":
        parts = replace(parts, controller=SysfsController(xavier))
    assert isinstance(parts.controller, SysfsController if via == "sysfs" else NvpmodelController)
    rows = run_campaign(cfg, parts)
    knobs = [tuple(r[k] for k in ("mode", "cpu_cores", "cpu_mhz", "gpu_mhz", "emc_mhz")) for r in rows]
    assert knobs == [("4c-1200-1000-1331.2", 4, 1190.4, 1032.75, 1331.2),
                     ("4c-1036.8-905.25-1331.2", 4, 1036.8, 905.25, 1331.2)]
    off, on = json.loads((tmp_path / "p.csv.json").read_text())["modes"]
    assert off["requested"]["gpu_mhz"] == 1000.0
    if via == "nvpmodel":  # the fake nvpmodel writes the custom conf's clocks as they are: the step, pinned
        assert off["read_back"]["gpu_mhz"] == 1032.75
    assert [n for n in off["notes"] if n.startswith("the board")] == [
        f"the board set 4c-1200-1000-1331.2's cpu_mhz to 1190.4, not the 1200 asked {WHY}; the row records 1190.4",
        f"the board set 4c-1200-1000-1331.2's gpu_mhz to 1032.75, not the 1000 asked {WHY}; the row records "
        "1032.75"]
    assert not [n for n in on["notes"] if n.startswith("the board")]


class _Collector(BaseHTTPRequestHandler):
    received: list = []
    status = 201

    def do_POST(self):  # noqa: N802 (http.server API)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).received.append((self.path, self.headers.get("X-API-Key"), json.loads(body)))
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(json.dumps({"workload_id": "lenet5-mnist", "rows_stored": 1}).encode())

    def log_message(self, *args):
        pass


@pytest.fixture
def service():
    _Collector.received, _Collector.status = [], 201
    server = HTTPServer(("127.0.0.1", 0), _Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", _Collector
    server.shutdown()


def test_upload_posts_rows_with_the_api_key(tmp_path, service, monkeypatch):
    url, handler = service
    monkeypatch.setenv("JETPREDICT_API_KEY", "s3cret")
    rows = run_campaign(_cfg(tmp_path, minibatches=2, upload=url + "/"))
    path, key, body = handler.received[0]
    assert path == "/v1/profiles" and key == "s3cret"
    assert body["rows"][0]["workload"] == "lenet5-mnist" and body["rows"][0]["epoch_energy_j"] is None
    assert body["rows"][0]["epoch_time_s"] == pytest.approx(rows[0]["epoch_time_s"])


def test_upload_failures_keep_the_files_and_name_the_field(tmp_path, service, monkeypatch):
    url, handler = service
    monkeypatch.delenv("JETPREDICT_API_KEY", raising=False)
    with pytest.raises(InputError, match="JETPREDICT_API_KEY") as err:
        upload.upload_rows(url, [{"a": 1}])
    assert err.value.field == "upload"
    monkeypatch.setenv("JETPREDICT_API_KEY", "wrong")
    handler.status = 403
    with pytest.raises(InputError, match="answered 403"):
        run_campaign(_cfg(tmp_path, minibatches=1, upload=url))
    assert len(read_profile_csv(tmp_path / "p.csv")) == 1


def test_an_adaptive_chooser_past_its_budget_is_stopped_before_the_extra_mode(tmp_path):
    maxn = load_device("orin-nx").preset("MAXN")

    class PastBudget:  # a chooser that never says stop
        budget = 1

        def next_mode(self, rows):
            return {"mode": "again", **dict(zip(MODE_FIELDS, maxn.knobs(), strict=True))}

        def record(self):
            return {}

    cfg = _cfg(tmp_path, device="sim:orin-nx", modes=None, minibatches=2, adaptive=lambda dev, modes: PastBudget())
    with pytest.raises(RuntimeError, match="past its budget of 1"):
        run_campaign(cfg)
    assert len(read_profile_csv(tmp_path / "p.csv")) == 1  # the one mode of the budget, not a second


def test_sim_device_runs_through_the_same_campaign(tmp_path):
    rows = run_campaign(_cfg(tmp_path, device="sim:orin-nano", modes="15W,7W", workload="resnet18-cifar10",
                             batch_size=16, workers=4, minibatches=5))
    assert [r["source"] for r in rows] == ["simulated", "simulated"]
    assert all(r["epoch_energy_j"] and r["base_power_w"] for r in rows)
    assert rows[0]["epoch_time_s"] < rows[1]["epoch_time_s"]  # 7W is slower than 15W
    assert len(read_profile_csv(tmp_path / "p.csv")) == 2


def test_image_folder_through_dataloader_worker_processes(tmp_path):
    from test_workloads import _image_folder

    root = _image_folder(tmp_path / "data", classes=2, per_class=4)
    rows = run_campaign(_cfg(tmp_path, data=str(root), workers=1, batch_size=2, minibatches=3))
    row = rows[0]
    assert row["data_source"] == f"folder:{root}" and row["num_workers"] == 1
    assert row["minibatches_per_epoch"] == 4 and row["stall_time_s"] > 0   # 8 images / batch 2


def test_json_outputs_honour_the_umask(tmp_path):
    """A profile's JSON outputs get the permissions any new file gets (umask 022: 0644), not mkstemp's 0600."""
    import os

    old = os.umask(0o022)
    try:
        run_campaign(CampaignConfig(device="sim:agx-xavier", workload="lenet5-mnist", out=tmp_path / "out.json",
                                    modes="MAXN", minibatches=2, progress=False))
    finally:
        os.umask(old)
    assert (tmp_path / "out.json").stat().st_mode & 0o777 == 0o644


def test_a_jetson_profile_pins_each_modes_clocks_and_restores_them(fake_root, tmp_path):
    """By default the clocks run at each mode's caps (jetson_clocks after every switch, DVFS off: what the rows
    record), and the clocks in force before are stored first and restored last."""
    nano = load_device("orin-nano")
    fake_root.add_jetson(nano)
    fake_root.idle_clocks()  # the governors would idle below the caps
    gpu = "/sys/devices/17000000.ga10b/devfreq/17000000.ga10b"
    before = (fake_root.read(f"{gpu}/min_freq"), fake_root.read(f"{gpu}/max_freq"))
    rows = run_campaign(_cfg(tmp_path, device="jetson", modes="15W,7W", settle_s=0.0, idle_s=0.0, minibatches=2))
    doc = json.loads((tmp_path / "p.csv.json").read_text())
    for row, mode in zip(rows, doc["modes"], strict=True):
        assert {k: mode["read_back"][k] for k in ("cpu_mhz", "gpu_mhz", "emc_mhz")} == {
            k: row[k] for k in ("cpu_mhz", "gpu_mhz", "emc_mhz")}  # pinned at the caps the row records
        assert row["gpu_mhz"] == nano.preset(row["mode"]).gpu_mhz  # the mode's cap
        assert not [n for n in mode["notes"] if n.startswith("read-back")]
        assert campaign.UNLOCKED_CLOCKS_NOTE not in mode["notes"] and doc["config"]["lock_clocks"] is True
    calls = [c if c[0] == "jetson_clocks" else c[:2] for c in fake_root.calls() if c[:2] != ["nvpmodel", "-q"]]
    from jetpredict.profiler.powermode import state as state_file

    store = str(fake_root.state_dir() / state_file.CLOCKS_STORE_NAME)
    assert calls == [["jetson_clocks", "--store", store],
                     ["nvpmodel", "-m"], ["jetson_clocks"], ["nvpmodel", "-m"], ["jetson_clocks"],
                     ["nvpmodel", "-m"], ["jetson_clocks", "--restore", store]]
    assert (fake_root.read(f"{gpu}/min_freq"), fake_root.read(f"{gpu}/max_freq")) == before
    assert fake_root.state_files() == []  # the store went with the state file


def test_no_lock_clocks_is_a_jetson_flag(tmp_path):
    for device in ("host", "sim:orin-nx"):
        with pytest.raises(InputError, match="--no-lock-clocks applies to --device jetson") as err:
            run_campaign(_cfg(tmp_path, device=device, modes=None, lock_clocks=False))
        assert err.value.field == "lock_clocks"
    assert not (tmp_path / "p.csv").exists()


def test_base_power_is_the_idle_draw_and_avg_power_the_training_draw_per_mode(fake_root, tmp_path):
    """The module rail draws 8 W idle and 15 W while minibatches run, on a fake Orin Nano through two modes."""
    from fakes import BUSY_W, IDLE_W, busy_vdd_in
    from jetpredict.profiler.power import detect_power_meter

    nano = load_device("orin-nano")
    fake_root.add_jetson(nano)
    backend = busy_vdd_in(fake_root)
    parts = CampaignParts("orin-nano", nano, modes_to_profile(nano, "15W,7W"),
                          RealTimeRunner(backend, detect_power_meter("orin-nano")),
                          detect_controller("jetson", "orin-nano"), 0.0)
    rows = run_campaign(_cfg(tmp_path, device="jetson", idle_s=0.3, hz=100.0, warmup=3, minibatches=20), parts)
    assert [r["mode"] for r in rows] == ["15W", "7W"] and backend.minibatches == 46
    for k, r in enumerate(rows):
        assert r["base_power_w"] == pytest.approx(IDLE_W, rel=0.01)
        # The measured minibatches' window (after 3 warm-up ones): busy but for the gaps between minibatches,
        # which a loaded run stretches (13.7 W against a flat 15 W +- 5%) and the 100 Hz samples may miss.
        truth = IDLE_W + (BUSY_W - IDLE_W) * backend.busy_share(23 * k + 3, 23 * k + 22)
        assert truth - 0.15 * (BUSY_W - IDLE_W) <= r["avg_power_w"] <= BUSY_W * 1.01, (r["avg_power_w"], truth)


def test_an_empty_base_power_has_its_reason_in_the_sidecar(fake_root, tmp_path):
    from fakes import BusyRailBackend, LateMeter

    backend = BusyRailBackend(fake_root, "/unused/curr1_input", 0, 0, minibatch_s=0.05)  # samples in its window
    nan = float("nan")
    parts = CampaignParts("host", None, [PowerMode("host", 1, nan, nan, nan)],
                          RealTimeRunner(backend, LateMeter(backend)), None, 0.0)
    # Two warm-up minibatches: the sample before the measured window is read once the sensor answers.
    rows = run_campaign(_cfg(tmp_path, idle_s=0.2, hz=50.0, warmup=2, minibatches=5), parts)
    assert rows[0]["base_power_w"] is None and rows[0]["avg_power_w"] == pytest.approx(9.0)
    notes = json.loads((tmp_path / "p.csv.json").read_text())["modes"][0]["notes"]
    reasons = [n for n in notes if n.startswith("base_power_w is empty: idle window: tegrastats:VDD_IN: ")]
    assert len(reasons) == 1 and "failed reads" in reasons[0] and "no line yet" in reasons[0]


def test_host_modes_take_thread_counts_up_to_every_core():
    """``--modes N`` on the host: every core is the ``host`` mode (as with no --modes), one more is refused."""
    import os

    from jetpredict.profiler.mode_lists import host_modes

    cores = os.cpu_count() or 1
    assert [(m.mode, m.cpu_cores) for m in host_modes(f"1,{cores}")][-1] == ("host", cores)
    with pytest.raises(InputError, match=f"{cores + 1} threads is outside 1..{cores} on this host"):
        host_modes(str(cores + 1))
