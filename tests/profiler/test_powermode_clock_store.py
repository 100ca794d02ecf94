"""Locked clocks (``jetson_clocks``) are undone on every exit path, whatever state file a run starts over: a store
a record on disk names is never overwritten nor deleted, a run that pins records a store before its first switch,
and a pin is never cut by a signal. Checked with the fake nvpmodel/jetson_clocks, crash included."""

from __future__ import annotations

import json
import signal
import textwrap
from pathlib import Path

import pytest
from fakes import CPU_DIR, EMC_CAP, GPU_DIRS, finish, start_python
from jetpredict.models.catalogue import load_device
from jetpredict.profiler.powermode import state as state_file
from jetpredict.profiler.powermode.nvpmodel import NvpmodelController
from jetpredict.profiler.powermode.recovery import restore_unfinished

from jetpredict.cli import main

GPU = GPU_DIRS["T234"]


@pytest.fixture
def nano(orin_nano):
    return orin_nano


def _clocks(root) -> dict[str, str]:
    """The knobs jetson_clocks pins and nvpmodel caps: equal before and after a run means the clocks came back."""
    knobs = [f"{CPU_DIR}/cpu0/cpufreq/scaling_min_freq", f"{CPU_DIR}/cpu0/cpufreq/scaling_max_freq",
             f"{GPU}/min_freq", f"{GPU}/max_freq", EMC_CAP]
    return {k: root.read(k) for k in knobs}


def _tools(root, since: int = 0) -> list[list[str]]:
    return [c for c in root.calls()[since:] if c[0] == "jetson_clocks" or c[:2] == ["nvpmodel", "-m"]]


def _record(root) -> dict:
    return json.loads((root.state_dir() / state_file.STATE_FILE_NAME).read_text())


def _crash(ctl: NvpmodelController, root) -> None:
    """What a SIGKILL leaves: the state file (its pid dead), no restore; the lock and handlers dropped."""
    doc = _record(root)
    doc["pid"] = 999999
    (root.state_dir() / state_file.STATE_FILE_NAME).write_text(json.dumps(doc))
    ctl._uninstall_handlers()
    ctl._release_lock()


def _locked_run(dev, mode: str = "15W") -> NvpmodelController:
    ctl = NvpmodelController(dev, jetson_clocks=True)
    ctl.__enter__()
    ctl.apply(dev.preset(mode))
    return ctl


def _locked_run_claiming_its_store(dev, root) -> tuple[NvpmodelController, str]:
    """A locked run entered over a kept record: its own store is on disk in the record before any switch."""
    ctl = NvpmodelController(dev, jetson_clocks=True)
    ctl.__enter__()
    run_store = str(root.state_dir() / state_file.RUN_CLOCKS_STORE_NAME)
    record = _record(root)
    assert record["snapshot"] == {"id": 0, "clocks": run_store} and record["jetson_clocks"] is True
    return ctl, run_store


def _apply_over_a_crashed_locked_run(root) -> tuple[dict[str, str], Path]:
    """A locked run in 7W killed, then ``apply 7W`` (which adopts its record): the clocks before the run and
    the store that holds them."""
    original = _clocks(root)
    _crash(_locked_run(load_device("orin-nano"), "7W"), root)
    assert main(["apply", "--device", "jetson", "--mode", "7W"]) == 0
    return original, root.state_dir() / state_file.CLOCKS_STORE_NAME


def test_a_locked_run_over_an_apply_that_adopted_a_crashed_locked_run_keeps_its_store(nano):
    dev = load_device("orin-nano")
    original, store = _apply_over_a_crashed_locked_run(nano)
    saved = store.read_text()
    applied = _clocks(nano)
    with NvpmodelController(dev, jetson_clocks=True) as ctl:
        ctl.apply(dev.preset("15W"))
    assert _clocks(nano) == applied  # back in the applied mode, unpinned
    assert store.read_text() == saved  # the original clocks, neither overwritten nor deleted
    assert _record(nano)["snapshot"]["clocks"] == str(store) and _record(nano)["kept"] is True
    n = len(nano.calls())
    assert restore_unfinished().restored
    assert _tools(nano, n) == [["nvpmodel", "-m", "0"], ["jetson_clocks", "--restore", str(store)]]
    assert _clocks(nano) == original and nano.state_files() == []


def test_a_locked_run_over_an_apply_that_adopted_a_crashed_locked_run_then_crashing_restores(nano):
    original, store = _apply_over_a_crashed_locked_run(nano)
    _crash(_locked_run(load_device("orin-nano")), nano)
    n = len(nano.calls())
    assert restore_unfinished().restored
    assert _tools(nano, n) == [["nvpmodel", "-m", "0"], ["jetson_clocks", "--restore", str(store)]]
    assert _clocks(nano) == original and nano.state_files() == []


def test_a_locked_run_over_an_apply_records_its_store_so_restore_unpins_after_a_crash(nano):
    dev = load_device("orin-nano")
    original = _clocks(nano)
    assert main(["apply", "--device", "jetson", "--mode", "7W"]) == 0
    assert _record(nano)["snapshot"]["clocks"] is None
    n = len(nano.calls())
    ctl, run_store = _locked_run_claiming_its_store(dev, nano)
    assert _tools(nano, n) == [["jetson_clocks", "--store", run_store]]
    ctl.apply(dev.preset("15W"))
    assert _clocks(nano)[f"{GPU}/min_freq"] == _clocks(nano)[f"{GPU}/max_freq"]  # pinned
    _crash(ctl, nano)
    n = len(nano.calls())
    assert restore_unfinished().restored
    # The store holds the applied mode's clocks: put back before the switch, whose caps then stand.
    assert _tools(nano, n) == [["jetson_clocks", "--restore", run_store], ["nvpmodel", "-m", "0"]]
    assert _clocks(nano) == original and nano.state_files() == []


def test_a_locked_run_over_an_apply_ends_in_the_applied_clocks_and_keeps_the_apply_record(nano):
    dev = load_device("orin-nano")
    assert main(["apply", "--device", "jetson", "--mode", "7W"]) == 0
    applied, kept = _clocks(nano), _record(nano)
    with NvpmodelController(dev, jetson_clocks=True) as ctl:
        ctl.apply(dev.preset("15W"))
    assert _clocks(nano) == applied
    assert _record(nano)["snapshot"] == kept["snapshot"] and _record(nano)["kept"] is True
    assert nano.state_files() == [state_file.STATE_FILE_NAME]  # the run's store went


@pytest.mark.parametrize("crash", [False, True])
def test_a_locked_run_adopting_an_unlocked_unfinished_run_stores_and_unpins(nano, crash):
    dev = load_device("orin-nano")
    original = _clocks(nano)
    unlocked = NvpmodelController(dev, jetson_clocks=False)
    unlocked.__enter__()
    unlocked.apply(dev.preset("7W"))
    _crash(unlocked, nano)
    n = len(nano.calls())
    ctl, run_store = _locked_run_claiming_its_store(dev, nano)
    ctl.apply(dev.preset("15W"))
    if crash:
        _crash(ctl, nano)
        assert restore_unfinished().restored
    else:
        ctl.__exit__(None, None, None)
    assert _tools(nano, n) == [["jetson_clocks", "--store", run_store], ["nvpmodel", "-m", "0"], ["jetson_clocks"],
                               ["jetson_clocks", "--restore", run_store], ["nvpmodel", "-m", "0"]]
    assert _clocks(nano) == original and nano.state_files() == []



def test_a_locked_run_over_an_apply_that_kept_a_run_store_leaves_that_store_for_restore(nano):
    """A record naming a run's own store (a locked run over an apply, crashed) that a second apply kept: a
    locked run over it stores elsewhere and drops only its own store, so `jetpredict restore` still unpins."""
    dev = load_device("orin-nano")
    original = _clocks(nano)
    run_store = nano.state_dir() / state_file.RUN_CLOCKS_STORE_NAME
    assert main(["apply", "--device", "jetson", "--mode", "7W"]) == 0
    _crash(_locked_run(dev), nano)  # the record now names the run's store, taken in 7W
    assert _record(nano)["snapshot"]["clocks"] == str(run_store)
    assert main(["apply", "--device", "jetson", "--mode", "7W"]) == 0  # adopts it and keeps it
    saved = run_store.read_text()
    applied = _clocks(nano)
    n = len(nano.calls())
    with NvpmodelController(dev, jetson_clocks=True) as ctl:
        ctl.apply(dev.preset("15W"))
    in_force = str(nano.state_dir() / state_file.CLOCKS_STORE_NAME)
    # The clocks in force go beside the kept store, and come back after the switch to the mode they were in.
    assert _tools(nano, n) == [["jetson_clocks", "--store", in_force], ["nvpmodel", "-m", "0"], ["jetson_clocks"],
                               ["nvpmodel", "-m", "1"], ["jetson_clocks", "--restore", in_force]]
    assert _clocks(nano) == applied
    assert run_store.read_text() == saved  # neither overwritten nor deleted
    assert _record(nano)["snapshot"] == {"id": 0, "clocks": str(run_store)} and _record(nano)["kept"] is True
    assert nano.state_files() == sorted([state_file.STATE_FILE_NAME, state_file.RUN_CLOCKS_STORE_NAME])
    n = len(nano.calls())
    assert restore_unfinished().restored
    # Taken in 7W: put back before the switch to 15W, whose caps then stand.
    assert _tools(nano, n) == [["jetson_clocks", "--restore", str(run_store)], ["nvpmodel", "-m", "0"]]
    assert _clocks(nano) == original and nano.state_files() == []


# Signals at their defaults, as a command line has them (a suite under nohup would pass SIGHUP ignored).
_PIN_CHILD = textwrap.dedent("""
    import signal, sys
    for _name in ("SIGHUP", "SIGQUIT", "SIGTERM"):
        signal.signal(getattr(signal, _name), signal.SIG_DFL)
    from jetpredict.models.catalogue import load_device
    from jetpredict.profiler.powermode.nvpmodel import NvpmodelController
    dev = load_device("orin-nano")
    with NvpmodelController(dev, jetson_clocks=True) as ctl:
        ctl.apply(dev.preset("7W"))
""")


@pytest.mark.slow
def test_a_signal_during_the_pin_restores_after_the_pin_landed(nano):
    original = _clocks(nano)
    nano.signal_in_pin()
    child = start_python(nano, _PIN_CHILD)
    _, err = finish(child)
    nano.wait_pin()
    assert child.returncode == 128 + signal.SIGTERM, err
    store = str(nano.state_dir() / state_file.CLOCKS_STORE_NAME)
    assert _tools(nano) == [["jetson_clocks", "--store", store], ["nvpmodel", "-m", "1"], ["jetson_clocks"],
                            ["nvpmodel", "-m", "0"], ["jetson_clocks", "--restore", store]]
    assert _clocks(nano) == original and nano.state_files() == []
