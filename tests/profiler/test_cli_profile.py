"""``jetpredict profile`` end to end: built-in workloads, a user module:factory model, bad input."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from jetpredict.models.profile_rows import read_profile_csv, read_profile_rows

from jetpredict.cli import main

HERE = Path(__file__).parent


pytestmark = pytest.mark.usefixtures("torch_one_thread")


@pytest.mark.parametrize("workload", ["lenet5-mnist", "resnet18-cifar10"])
def test_host_profile_writes_valid_rows_and_every_minibatch(tmp_path, workload, capsys):
    out = tmp_path / "p.csv"
    rc = main(["profile", "--device", "host", "--workload", workload, "--batch-size", "2", "--workers", "0",
               "--warmup", "1", "--minibatches", "3", "--modes", "1", "--out", str(out)])
    assert rc == 0
    row = read_profile_csv(out).iloc[0]
    assert row["workload"] == workload and row["source"] == "measured"
    assert row["stall_time_s"] > 0 and row["compute_time_s"] > 0
    assert row["epoch_energy_j"] != row["epoch_energy_j"] and row["power_null_reason"]  # empty, with why
    doc = json.loads(Path(f"{out}.json").read_text())
    assert len(doc["modes"][0]["minibatches"]) == 3
    err = capsys.readouterr().err
    assert "mode 1/1" in err and "profiled 1 mode(s)" in err   # progress bar and summary on stderr


def test_user_factory_profiles_from_the_working_directory(tmp_path):
    # A user's own module, next to where they run the command; nothing in jetpredict knows about it.
    shutil.copy(HERE.parents[1] / "examples" / "lstm_lm.py", tmp_path / "my_lm.py")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    # The console script does not put the working directory on sys.path; the profiler must.
    exe = shutil.which("jetpredict")
    cmd = [exe] if exe else [sys.executable, "-m", "jetpredict"]
    proc = subprocess.run(
        [*cmd, "profile", "--device", "host", "--workload",
         "my_lm:lstm_language_model", "--batch-size", "4", "--workers", "0", "--warmup", "1",
         "--minibatches", "2", "--modes", "1", "--no-progress", "--out", "lm.json"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    row = read_profile_rows(tmp_path / "lm.json").iloc[0]
    assert row["workload"] == "my_lm:lstm_language_model" and row["minibatches_per_epoch"] == 512
    assert row["data_source"] == "user" and row["macs_fwd"] > 0


@pytest.mark.parametrize(("args", "field_text"), [
    (["--minibatches", "0"], "--minibatches must be >= 1"),
    (["--device", "toaster"], "--device must be host, jetson or sim:DEVICE"),
    (["--workload", "alexnet-imagenet"], "unknown workload 'alexnet-imagenet'"),
    (["--batch-size", "0"], "batch size must be >= 1"),
])
def test_bad_input_exits_2_with_a_clear_message(tmp_path, capsys, args, field_text):
    base = {"--device": "host", "--workload": "lenet5-mnist", "--minibatches": "2"}
    for flag, value in zip(args[::2], args[1::2], strict=True):
        base[flag] = value
    argv = ["profile", *[x for kv in base.items() for x in kv], "--workers", "0", "--warmup", "0",
            "--no-progress", "--out", str(tmp_path / "x.csv")]
    assert main(argv) == 2
    assert field_text in capsys.readouterr().err


def test_the_verb_registers_without_importing_torch():
    code = "import sys; import jetpredict.profiler.cli; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
