"""A mode whose minibatch times varied too much to know its epoch time is said at once, on standard error
and in its sidecar notes; a steady mode (the twin's) says nothing."""

from __future__ import annotations

import json
import time

import pytest
from jetpredict.models.catalogue import PowerMode
from jetpredict.models.profiling_protocol import MAX_MINIBATCHES_PER_MODE, NOISY_EPOCH_TIME_REL_SE
from jetpredict.profiler.backends import TorchBackend
from jetpredict.profiler.campaign import CampaignConfig, CampaignParts, run_campaign
from jetpredict.profiler.power import NullPowerMeter
from jetpredict.profiler.powermode import detect_controller
from jetpredict.profiler.runner import RealTimeRunner, noisy_measurement_note


def _row(cv: float | None, n: int) -> dict:
    return {"mode": "MAXN", "mb_total_cv": cv, "minibatches_measured": n}


def test_the_note_gives_the_epoch_times_standard_error_and_the_minibatches_that_would_meet_the_bar():
    note = noisy_measurement_note(_row(0.5, 40))
    # 0.5 / sqrt(40) = 7.9%; (7.9% / 2%)^2 x 40 = 625 minibatches bring it to 2%
    assert note == ("mode MAXN: its minibatch times varied (cv 0.50 over 40 minibatches), so its epoch_time_s is "
                    "known to about ±7.9% (one standard error, above 2%): something else may have shared the device "
                    "or its clocks moved; profile it again on a quiet device, or with --minibatches 625")
    assert NOISY_EPOCH_TIME_REL_SE == 0.02


@pytest.mark.parametrize("cv, n", [(0.12, 40), (0.02, 3), (None, 1), (float("nan"), 40)])
def test_a_steady_or_unknown_spread_says_nothing(cv, n):
    assert noisy_measurement_note(_row(cv, n)) is None


def test_the_advice_stays_within_the_most_minibatches_a_mode_may_take():
    note = noisy_measurement_note(_row(3.0, 40))
    assert note.endswith(f"profile it again on a quiet device (--minibatches {MAX_MINIBATCHES_PER_MODE:,} "
                         "would not bring it to 2%)")
    assert "±47%" in note  # 3.0 / sqrt(40)


def test_the_warning_fires_only_above_the_bar():
    """0.04 / sqrt(4) is the bar exactly (2%): nothing said; a hair above it, the warning."""
    assert noisy_measurement_note(_row(0.04, 4)) is None
    assert "known to about ±2%" in noisy_measurement_note(_row(0.0401, 4))


def test_the_advice_rounds_the_minibatches_up_to_meet_the_bar():
    # 0.33 / sqrt(10) = 10.4%; (10.4% / 2%)^2 x 10 = 272.25: 272 would fall short of 2%, 273 meets it
    assert noisy_measurement_note(_row(0.33, 10)).endswith(", or with --minibatches 273")


def test_the_advice_may_name_the_most_minibatches_a_mode_may_take():
    # 2.0 / sqrt(100) = 20%; (20% / 2%)^2 x 100 = 10,000, the protocol's most: still advised
    assert MAX_MINIBATCHES_PER_MODE == 10_000
    assert noisy_measurement_note(_row(2.0, 100)).endswith(f", or with --minibatches {MAX_MINIBATCHES_PER_MODE}")

class EveryThirdStepStalls(TorchBackend):
    """A real backend whose every third training step is held up 60 ms, as by another process on the CPU."""

    steps = 0

    def _step(self, inputs, targets):
        self.steps += 1
        if self.steps % 3 == 0:
            time.sleep(0.06)
        return super()._step(inputs, targets)


@pytest.mark.usefixtures("torch_one_thread")
def test_a_noisy_mode_is_warned_at_once_and_noted_in_its_sidecar(tmp_path, capsys):
    cfg = CampaignConfig(device="host", workload="lenet5-mnist", out=tmp_path / "p.csv", modes="1", batch_size=8,
                         workers=0, warmup=1, minibatches=6, progress=False)
    nan = float("nan")
    runner = RealTimeRunner(EveryThirdStepStalls("lenet5-mnist", 8, 0), NullPowerMeter())
    parts = CampaignParts("host", None, [PowerMode("busy", 1, nan, nan, nan)], runner, detect_controller("host"), 0.0)
    run_campaign(cfg, parts)
    err = capsys.readouterr().err
    assert "mode busy: its minibatch times varied (cv " in err and "over 6 minibatches" in err
    notes = json.loads((tmp_path / "p.csv.json").read_text())["modes"][0]["notes"]
    assert [n for n in notes if n.startswith("mode busy: its minibatch times varied")] == [err.strip()]


def test_the_twins_steady_modes_say_nothing(tmp_path, capsys):
    cfg = CampaignConfig(device="sim:agx-xavier", workload="lenet5-mnist", out=tmp_path / "s.csv", modes="MAXN,0",
                         progress=False)
    run_campaign(cfg)
    assert "varied" not in capsys.readouterr().err
    doc = json.loads((tmp_path / "s.csv.json").read_text())
    assert not any("varied" in note for mode in doc["modes"] for note in mode["notes"])
