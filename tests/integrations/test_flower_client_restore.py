"""The Flower client's planned round on the exit paths the block itself does not take: the power meter
failing or interrupted while it starts, a CUDA error at the block's closing synchronize; and which meter
the round closes (its own, not the caller's). The mode is the fake nvpmodel's under JETPREDICT_SYSFS_ROOT."""

from __future__ import annotations

import pytest

pytest.importorskip("flwr", reason="the Flower integration needs the [flower] extra")

from flower_grid import DEVICE, plan_for, train_message
from jetpredict.models.catalogue import load_device

from jetpredict.integrations.flower import PlannedRound
from tests.profiler.fakes import CloseCountingMeter

STATUS = "/var/lib/nvpmodel/status"
DEFAULT_STATUS = "pmode:0002"  # the orin fixture's 15W
MAXN_STATUS = "pmode:0000"


def maxn_message():
    return train_message(plan_for(load_device(DEVICE).preset("MAXN")))


@pytest.mark.parametrize("failure", [KeyboardInterrupt(), RuntimeError("the power meter cannot start")],
                         ids=["ctrl-c", "error"])
def test_a_meter_that_fails_or_is_interrupted_while_starting_restores_the_mode(orin, monkeypatch, failure):
    import jetpredict.profiler.power as power

    def failing(*args, **kwargs):
        raise failure

    monkeypatch.setattr(power, "detect_power_meter", failing)
    with pytest.raises(type(failure)), PlannedRound(maxn_message()):
        pytest.fail("the block ran without a meter")
    assert orin.read(STATUS) == DEFAULT_STATUS


def test_a_cuda_error_at_the_closing_synchronize_still_restores_the_mode(orin):
    """The block's last kernel fails asynchronously: the error surfaces at the synchronize that ends the
    measurement window, and the planned mode is undone anyway."""
    calls = []

    def sync() -> None:
        calls.append(1)
        if len(calls) > 1:  # the window's closing synchronize
            raise RuntimeError("CUDA error: an illegal memory access was encountered")

    with pytest.raises(RuntimeError, match="CUDA error"), PlannedRound(maxn_message(), sync=sync):
        assert orin.read(STATUS) == MAXN_STATUS
    assert orin.read(STATUS) == DEFAULT_STATUS


def test_the_round_closes_the_meter_it_opened_and_not_the_callers(monkeypatch):
    import jetpredict.profiler.power as power

    opened: list[CloseCountingMeter] = []

    def detect(*args, **kwargs) -> CloseCountingMeter:
        opened.append(CloseCountingMeter())
        return opened[-1]

    monkeypatch.setattr(power, "detect_power_meter", detect)
    with PlannedRound(train_message(None), device=DEVICE):
        pass
    assert [m.closes for m in opened] == [1]
    mine = CloseCountingMeter()
    for _ in range(2):  # a caller's meter, reused round after round: the caller closes it
        with PlannedRound(train_message(None), device=DEVICE, meter=mine):
            pass
    assert mine.closes == 0 and len(opened) == 1
