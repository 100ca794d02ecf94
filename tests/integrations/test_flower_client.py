"""Client side of the Flower integration: the planned mode is applied through the real controllers (fake
nvpmodel under JETPREDICT_SYSFS_ROOT) and restored on every exit path; time and energy reach the reply."""

from __future__ import annotations

import dataclasses
import json
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from tools.testing import NAPPING_MINUTE

pytest.importorskip("flwr", reason="the Flower integration needs the [flower] extra")

from flower_grid import DEVICE, plan_for, train_message
from flwr.app import MetricRecord, RecordDict
from jetpredict.models.catalogue import PowerMode, load_device
from jetpredict.models.errors import InputError
from jetpredict.profiler.power import NullPowerMeter
from jetpredict.profiler.powermode import detect_controller

from jetpredict.integrations.flower import (
    ENERGY_METRIC,
    REPORT_RECORD,
    TIME_METRIC,
    ClientPlan,
    PlannedRound,
    TwinWorkload,
    read_plan,
    twin_round,
)

VDD_IN_W = 15.0  # 5000 mV x 3000 mA on the fake INA3221


def test_the_plan_record_says_where_its_prediction_came_from(caplog):
    """A node's ``jetpredict.plan`` carries what the prediction of its mode rests on, through the
    ConfigRecord (plain strings and ints) and back, and the node logs it; a record without them reads as
    unknown (None)."""
    provenance = {"workload_id": "my-resnet", "reference_source": "simulated", "workload_source": "published",
                  "split_source": "epoch_totals", "profiled_modes": 4, "model_version": "mech-14",
                  "cross_device": True}
    plan = dataclasses.replace(plan_for(load_device(DEVICE).preset("MAXN")), **provenance)
    record = plan.to_config()
    assert {k: record[k.replace("_", "-")] for k in provenance} == provenance
    assert all(isinstance(record[k.replace("_", "-")], str | int) for k in provenance)
    assert read_plan(train_message(plan)) == plan and plan.provenance() == provenance
    twin = TwinWorkload("lenet5-mnist", epoch_scale=plan.epoch_scale)
    with caplog.at_level("INFO", logger="jetpredict.integrations.flower.client"), PlannedRound(
            train_message(plan), twin=twin):
        pass
    assert "workload_id=my-resnet" in caplog.text and "reference_source=simulated" in caplog.text
    assert "workload_source=published" in caplog.text and "profiled_modes=4" in caplog.text
    for key in provenance:
        del record[key.replace("_", "-")]
    assert all(v is None for v in ClientPlan.from_config(record, 7).provenance().values())


def switches(root) -> list[str]:
    return [c[-1] for c in root.calls() if c[0] == "nvpmodel" and "-m" in c]


def custom_mode() -> PowerMode:
    d = load_device(DEVICE)
    return PowerMode("custom", 2, d.cpu_steps_mhz[3], d.gpu_steps_mhz[2], d.emc_steps_mhz[1])


def test_plan_travels_in_the_train_message():
    plan = plan_for(load_device(DEVICE).preset("MAXN"))
    assert read_plan(train_message(plan)) == plan
    assert read_plan(train_message(None)) is None


@pytest.mark.parametrize("key", ["cpu-mhz", "meets-deadline"])
def test_a_plan_record_without_a_key_it_needs_is_refused_naming_the_key(key):
    """A mode's clocks, and whether the plan meets the deadline: a record missing one is no plan."""
    record = plan_for(load_device(DEVICE).preset("MAXN")).to_config()
    del record[key]
    with pytest.raises(InputError, match=key):
        ClientPlan.from_config(record)


def test_planned_preset_is_applied_measured_and_restored(orin):
    maxn = load_device(DEVICE).preset("MAXN")
    with PlannedRound(train_message(plan_for(maxn)), sampler_hz=50.0) as planned:
        assert orin.read("/var/lib/nvpmodel/status") == "pmode:0000"
        time.sleep(0.25)
    assert switches(orin) == ["0", "2"]  # MAXN, then back to the default 15W
    assert orin.read("/var/lib/nvpmodel/status") == "pmode:0002"
    report = planned.report
    assert report["source"] == "measured" and report["mode"] == "MAXN" and report["mode-applied"] is True
    assert report["meter"] == "ina3221:VDD_IN"
    assert report["time-s"] >= 0.25
    assert report["energy-j"] == pytest.approx(VDD_IN_W * report["time-s"], rel=1e-6)
    assert report["avg-power-w"] == pytest.approx(VDD_IN_W)


def test_exception_restores_the_previous_mode_and_propagates(orin):
    mode = custom_mode()
    with pytest.raises(ZeroDivisionError), PlannedRound(train_message(plan_for(mode))):
        assert detect_controller("jetson", DEVICE).read_back().cpu_cores == 2
        1 / 0  # noqa: B018
    assert switches(orin)[-1] == "2"
    assert orin.read("/var/lib/nvpmodel/status") == "pmode:0002"
    assert detect_controller("jetson", DEVICE).read_back().cpu_cores == 4  # 15W runs 4 cores


# Default dispositions, set explicitly: a child inherits an ignored SIGINT from a suite run as a background
# job (nohup ... &), and an ignored signal stays ignored, so the sigint case ran its whole minute (CI, twice).
# The child waits that minute in naps (tools.testing.NAPPING_MINUTE).
CHILD = textwrap.dedent("""
    import json, signal, sys, time
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    from flwr.app import Message, Metadata, RecordDict
    from jetpredict.integrations.flower import PLAN_RECORD, ClientPlan, PlannedRound
    plan = ClientPlan(**json.loads(sys.argv[1]))
    meta = Metadata(run_id=1, message_id="m-1", src_node_id=0, dst_node_id=7, reply_to_message_id="",
                    group_id="3", created_at=0.0, ttl=3600.0, message_type="train")
    message = Message(content=RecordDict({PLAN_RECORD: plan.to_config()}), metadata=meta)
    with PlannedRound(message):
        print("switched", flush=True)
        @MINUTE@
    print("unreachable", flush=True)
""").replace("@MINUTE@", NAPPING_MINUTE)


@pytest.mark.parametrize("sig, status", [(signal.SIGTERM, 128 + signal.SIGTERM), (signal.SIGINT, -signal.SIGINT)],
                         ids=["sigterm", "sigint"])
def test_a_signal_restores_the_previous_mode(orin, sig, status):
    """SIGTERM ends the run with 128 + 15 (the controller's SignalExit); Ctrl-C raises KeyboardInterrupt
    through the block, which Python ends with SIGINT itself once it is out."""
    env = orin.run_env()  # this checkout's jetpredict, under the kernel's refusals as the test's own writes
    plan = dataclasses.asdict(plan_for(custom_mode()))
    child = subprocess.Popen([sys.executable, "-c", CHILD, json.dumps(plan)], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        line = child.stdout.readline()
        assert line.startswith("switched"), line + child.stderr.read()
        assert orin.read("/var/lib/nvpmodel/status") != "pmode:0002"
        child.send_signal(sig)
        out, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == status, err
    assert "unreachable" not in out
    assert switches(orin)[-1] == "2"
    assert orin.read("/var/lib/nvpmodel/status") == "pmode:0002"
    assert detect_controller("jetson", DEVICE).read_back().cpu_cores == 4


def test_no_power_meter_gives_null_energy_with_a_reason_and_the_reply_carries_it():
    with PlannedRound(train_message(None), device=DEVICE, meter=NullPowerMeter("no sensor found")) as planned:
        pass
    report = planned.report
    assert report["mode-applied"] is False  # no plan: the mode in force is left alone
    assert "energy-j" not in report and "no sensor found" in report["energy-null-reason"]
    content = RecordDict({"metrics": MetricRecord({"num-examples": 3})})
    planned.attach(content)
    metrics = content.metric_records["metrics"]
    assert TIME_METRIC in metrics and ENERGY_METRIC not in metrics and metrics["num-examples"] == 3
    sent = content.config_records[REPORT_RECORD]
    assert sent["source"] == "measured" and sent["energy-null-reason"] == report["energy-null-reason"]


def test_twin_figures_are_the_twins_for_the_planned_mode_and_marked_simulated():
    device = load_device("nano")
    mode = device.preset(device.default_preset)
    twin = TwinWorkload("lenet5-mnist", epoch_scale=0.5)  # the plan's epoch scale: the work it predicts
    with PlannedRound(train_message(plan_for(mode, "nano")), twin=twin) as planned:
        pass
    expected = twin_round("nano", mode, twin, epochs=2)  # the plan's 2 local epochs
    report = planned.report
    assert report["source"] == "simulated" and report["meter"] == "sim:nano"
    assert report["time-s"] == pytest.approx(expected["time_s"])
    assert report["energy-j"] == pytest.approx(expected["energy_j"])
    # Without a plan the twin runs the device's fastest preset.
    with PlannedRound(train_message(None), device="nano", twin=twin) as unplanned:
        pass
    assert unplanned.report["mode"] == device.maxn.mode
    assert unplanned.report["time-s"] < report["time-s"]


def test_the_twin_runs_a_planned_gated_preset_gated():
    """A plan's mode reaches the node as a plain mode: Orin NX's 15W (4 of 8 TPCs powered) named at its clocks.
    The twin ran it with the whole GPU, faster than the preset the plan's prediction is for; it runs the preset,
    and the same clocks under another label stay a custom mode."""
    device = load_device("orin-nx")
    preset = device.preset("15W")
    twin = TwinWorkload("resnet18-cifar10", epoch_scale=0.02)
    planned = twin_round("orin-nx", PowerMode("15W", *preset.knobs()), twin, epochs=1)
    assert planned == pytest.approx(twin_round("orin-nx", preset, twin, epochs=1), rel=1e-12)
    custom = twin_round("orin-nx", PowerMode("custom", *preset.knobs()), twin, epochs=1)
    assert custom["time_s"] < planned["time_s"]


def test_the_plans_device_wins_over_the_node_config():
    nano = load_device("nano")
    twin = TwinWorkload("lenet5-mnist", epoch_scale=0.5)
    with PlannedRound(train_message(plan_for(nano.maxn, "nano")), device=DEVICE, twin=twin) as planned:
        pass
    assert planned.device == "nano" and planned.report["device"] == "nano" and planned.report["meter"] == "sim:nano"


def test_a_twin_without_a_device_is_refused_before_the_block_runs():
    ran = []
    with pytest.raises(InputError, match="jetpredict-device"), PlannedRound(train_message(None),
                                                                            twin=TwinWorkload("lenet5-mnist")):
        ran.append(1)
    assert ran == []


def test_a_twin_whose_epoch_scale_is_not_the_plans_is_refused_before_the_block_runs():
    """The plan predicts epochs x 0.5 profiled epochs; a twin costing 0.02 would report other work than the
    plan's, and a twin costing more would miss the deadline every round: refused, as jetpredict_mod refuses a
    constant epoch_scale that contradicts its twin's."""
    ran = []
    with pytest.raises(InputError, match=r"epoch_scale=0\.5 contradicts the twin's epoch_scale=0\.02") as caught, \
            PlannedRound(train_message(plan_for(load_device("nano").maxn, "nano")),
                         twin=TwinWorkload("lenet5-mnist", epoch_scale=0.02)):
        ran.append(1)
    assert ran == [] and caught.value.field == "epoch_scale"


def test_a_plan_less_twin_round_runs_the_twins_default_mode_and_states_its_work():
    """Without a plan the twin runs its ``default_mode`` for one epoch; the report says how much work
    (epochs x epoch scale) the figures are for."""
    twin = TwinWorkload("lenet5-mnist", epoch_scale=0.02, default_mode="5W")
    with PlannedRound(train_message(None), device="nano", twin=twin) as planned:
        pass
    report = planned.report
    assert (report["mode"], report["epochs"], report["epoch-scale"]) == ("5W", 1, 0.02)
    expected = twin_round("nano", load_device("nano").preset("5W"), twin, epochs=1)
    assert report["time-s"] == pytest.approx(expected["time_s"])


def test_attach_before_the_block_has_ended_says_so():
    planned = PlannedRound(train_message(None), device="nano", twin=TwinWorkload("lenet5-mnist"))
    with pytest.raises(RuntimeError, match="after the with-block"):
        planned.attach(RecordDict({}))


def test_the_twin_refuses_a_mode_the_device_cannot_run():
    nano = load_device("nano").maxn
    too_fast = PowerMode("custom", int(nano.cpu_cores), float(nano.cpu_mhz), float(nano.gpu_mhz) * 3,
                         float(nano.emc_mhz))
    with pytest.raises(InputError, match="gpu_mhz"):
        twin_round("nano", too_fast, TwinWorkload("lenet5-mnist"), epochs=1)


def test_the_twins_power_is_its_energy_over_its_time_and_above_idle():
    figures = twin_round("nano", load_device("nano").maxn, TwinWorkload("lenet5-mnist", epoch_scale=0.02), epochs=1)
    assert figures["avg_power_w"] == pytest.approx(figures["energy_j"] / figures["time_s"], rel=1e-6)
    assert figures["base_power_w"] < figures["avg_power_w"]
