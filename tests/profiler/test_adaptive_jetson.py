"""``profile --adaptive`` on a (fake) AGX Xavier: the chooser's modes are switched as custom modes with
``nvpmodel -f COPY -m ID``, and the mode in force before the run (MODE_30W_ALL, the xavier_30w fixture) is back at
its end, also when SIGTERM stops it inside a custom mode, with no state or lock file left."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest
from fakes import ORIGINAL_ID, finish, in_original_mode, start_cli
from jetpredict.models.profile_files import read_profile_csv
from jetpredict.profiler.powermode import state as state_file

pytestmark = pytest.mark.slow  # starts processes (see README: the fast pass); all torch work is in the child

BUDGET = 3


def _profile_args(out: Path) -> list[str]:
    return ["profile", "--device", "jetson", "--workload", "lenet5-mnist", "--adaptive", "--budget", str(BUDGET),
            "--batch-size", "2", "--workers", "0", "--warmup", "0", "--minibatches", "2", "--settle-s", "0",
            "--no-progress", "--out", str(out)]


def _custom_switches(root) -> list[list[str]]:
    """The recorded ``nvpmodel -f FILE -m ID`` calls: switches to a custom mode (a preset is ``-m ID`` alone)."""
    return [c for c in root.calls() if c[0] == "nvpmodel" and "-f" in c and "-m" in c]


def test_an_adaptive_run_switches_custom_modes_and_restores_the_original(xavier_30w, tmp_path):
    out = tmp_path / "p.csv"
    child = start_cli(xavier_30w, *_profile_args(out))
    _, err = finish(child, timeout_s=300)
    assert child.returncode == 0, err
    rows = read_profile_csv(out)
    assert 2 <= len(rows) <= BUDGET and rows["mode"].is_unique, err
    assert "adaptive: after 2 mode(s)" in err
    # Every profiled mode was switched to as a custom mode (the plan's and the chooser's picks are no presets)...
    switches = _custom_switches(xavier_30w)
    assert len(switches) == len(rows), xavier_30w.calls()
    confs = {c[c.index("-f") + 1] for c in switches}  # one configuration, beside the state file, gone at the end
    assert confs == {str(xavier_30w.state_dir() / state_file.CUSTOM_CONF_NAME)}, confs
    # ...then the original preset came back, as the last switch, with the clocks it had.
    last = [c for c in xavier_30w.calls() if c[0] == "nvpmodel" and "-m" in c][-1]
    assert "-f" not in last and last[-1] == str(ORIGINAL_ID)
    in_original_mode(xavier_30w)
    assert xavier_30w.state_files() == []
    doc = json.loads(Path(f"{out}.json").read_text())
    assert [m["mode"] for m in doc["modes"]] == list(rows["mode"])


def test_sigterm_inside_an_adaptive_runs_first_custom_mode_restores_the_original(xavier_30w, tmp_path):
    child = start_cli(xavier_30w, *_profile_args(tmp_path / "p.csv"))
    try:
        deadline = time.monotonic() + 120
        while not _custom_switches(xavier_30w):
            assert child.poll() is None, child.stderr.read()
            assert time.monotonic() < deadline, "no custom mode was applied within 120 s"
            time.sleep(0.02)
        assert xavier_30w.state_files() != []  # the run holds the device and keeps the original in its state
        child.send_signal(signal.SIGTERM)
    finally:
        _, err = finish(child, timeout_s=120)
    assert child.returncode == 128 + signal.SIGTERM, err
    assert err.strip().splitlines()[-1] == ("jetpredict profile: stopped by SIGTERM; the power mode in force before "
                                            "it was restored")
    in_original_mode(xavier_30w)
    assert xavier_30w.state_files() == []  # nor the custom modes' configuration beside the state file
