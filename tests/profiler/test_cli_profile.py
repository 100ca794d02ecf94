"""``jetpredict profile`` end to end: built-in workloads, a user module:factory model, bad input."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from jetpredict.models.profile_files import read_profile_csv, read_profile_rows

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
    assert len(doc["modes"][0]["minibatches"]["total_s"]) == 3
    err = capsys.readouterr().err
    assert "mode 1/1" in err and "profiled 1 mode(s)" in err   # progress bar and summary on stderr


@pytest.mark.slow
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


# Each message names the flag as typed (--batch-size, not batch_size or "batch size") and the rule.
@pytest.mark.parametrize(("args", "field_text"), [
    (["--minibatches", "0"], "--minibatches must be >= 1, got 0"),
    (["--minibatches", "4000000"], "--minibatches must be <= 10000 per mode"),
    (["--warmup", "-1"], "--warmup must be >= 0 minibatches, got -1"),
    (["--device", "toaster"], "--device must be host, jetson or sim:DEVICE"),
    (["--workload", "alexnet-imagenet"], "unknown workload 'alexnet-imagenet'"),
    (["--workload", " "], "--workload must be a non-empty name"),
    # relative or empty module names crashed importlib with a traceback (TypeError, ValueError)
    (["--workload", "..x:f"], "--workload '..x:f' must be MODULE:FACTORY, a dotted module path"),
    (["--workload", ":f"], "--workload ':f' must be MODULE:FACTORY"),
    (["--batch-size", "0"], "--batch-size must be >= 1, got 0"),
    (["--batch-size", "100000"], "--batch-size 100000 is larger than the dataset (60000 samples)"),
    (["--workers", "-1"], "--workers must be >= 0, got -1"),
    (["--device", "sim:agx-xavier", "--workers", "-1"], "--workers must be >= 0, got -1"),
    (["--device", "sim:agx-xavier", "--batch-size", "0"], "--batch-size must be >= 1, got 0"),
    # the twin as the real loader (it blamed milliseconds on the one minibatch per epoch that was left)
    (["--device", "sim:agx-xavier", "--batch-size", "100000"],
     "--batch-size 100000 is larger than the dataset (60000 samples)"),
    (["--device", "sim:agx-xavier", "--modes", "MAXN,4c-9999-900-1600"],
     "--modes 4c-9999-900-1600: cpu_mhz=9999 is outside device 'agx-xavier': must be in"),
])
def test_bad_input_exits_2_with_a_clear_message(tmp_path, capsys, args, field_text):
    base = {"--device": "host", "--workload": "lenet5-mnist", "--minibatches": "2", "--workers": "0",
            "--warmup": "0"}
    for flag, value in zip(args[::2], args[1::2], strict=True):
        base[flag] = value
    argv = ["profile", *[x for kv in base.items() for x in kv], "--no-progress",
            "--out", str(tmp_path / "x.csv")]
    assert main(argv) == 2
    assert field_text in capsys.readouterr().err


def test_the_verb_registers_without_importing_torch():
    code = "import sys; import jetpredict.profiler.cli; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_adaptive_profile_on_the_twin_stops_within_budget(tmp_path, capsys):
    # Candidates: the published AGX Xavier modes a-j (a mode table, as `plan --candidates` takes).
    cands = tmp_path / "a-j.csv"
    cands.write_text("mode,cpu_cores,cpu_mhz,gpu_mhz,emc_mhz\n"
                     "a,4,1200,670,1333\nb,8,1200,670,1333\nc,8,1200,900,1333\nd,8,1200,900,1600\n"
                     "e,8,2100,900,1600\nf,2,2100,900,1600\ng,8,2265,1377,2133\nh,8,2265,1377,1066\n"
                     "i,8,2265,1377,1333\nj,8,2265,1377,1600\n")
    out = tmp_path / "p.csv"
    rc = main(["profile", "--device", "sim:agx-xavier", "--workload", "lenet5-mnist", "--adaptive",
               "--budget", "4", "--candidates", str(cands), "--objective", "min-energy", "--warmup", "2",
               "--minibatches", "5", "--no-progress", "--out", str(out)])
    assert rc == 0
    rows = read_profile_csv(out)
    assert 2 <= len(rows) <= 4 and rows["mode"].is_unique
    assert set(rows["mode"]) <= set("abcdefghij") and (rows["source"] == "simulated").all()
    err = capsys.readouterr().err
    assert "adaptive: after 2 mode(s)" in err and ("stop:" in err or len(rows) == 4)
    doc = json.loads(Path(f"{out}.json").read_text())
    assert doc["adaptive"]["budget"] == 4 and len(doc["modes"]) == len(rows)


def test_adaptive_profile_starts_from_the_given_modes(tmp_path, capsys):
    out = tmp_path / "p.csv"
    rc = main(["profile", "--device", "sim:orin-nano", "--workload", "lenet5-mnist", "--adaptive",
               "--budget", "3", "--target-width", "0.000001", "--modes", "7W", "--warmup", "1",
               "--minibatches", "3", "--no-progress", "--out", str(out)])
    assert rc == 0
    rows = read_profile_csv(out)
    assert rows["mode"].iloc[0] == "7W" and len(rows) == 3  # the target cannot be met: the budget ends
    assert rows["mode"].is_unique and "stop: budget of 3 profiled modes spent" in capsys.readouterr().err


@pytest.mark.parametrize(("args", "text"), [
    (["--adaptive"], "--adaptive needs --budget"),
    (["--budget", "3"], "--budget needs --adaptive"),
    (["--max-power-w", "15"], "--max-power-w needs --adaptive"),
    (["--adaptive", "--budget", "3", "--device", "host"], "use --device jetson or sim:DEVICE"),
    (["--adaptive", "--budget", "3", "--objective", "fastest"], "argument --objective: invalid choice: 'fastest'"),
    # The chooser's checks are shared with the service; on this command line they name the flag.
    (["--adaptive", "--budget", "3", "--max-power-w", "-1"], "--max-power-w must be a finite number > 0"),
    (["--adaptive", "--budget", "3", "--max-epoch-time-s", "0"], "--max-epoch-time-s must be a finite"),
    (["--adaptive", "--budget", "3", "--confidence", "2"], "--confidence must be between 0.5 and"),
    (["--adaptive", "--budget", "3", "--target-width", "-1"], "--target-width must be a finite number > 0"),
    # A percent typed for a share: accepted before, and the loop ran to its budget on a 1200% target.
    (["--adaptive", "--budget", "3", "--target-width", "12"], "--target-width must be a share between 0 and 1 "
     "(e.g. 0.12 for 12%), got 12"),
    (["--adaptive", "--budget", "3", "--target-width", "1"], "--target-width must be a share between 0 and 1"),
    # Given, but out of range: said "--adaptive needs --budget N" before, as though it were missing.
    (["--adaptive", "--budget", "0"], "--budget (modes to profile) must be a whole number >= 1, got 0"),
    (["--adaptive", "--budget", "-1"], "--budget (modes to profile) must be a whole number >= 1, got -1"),
    # A bad row of the candidates file by its line (the blank line counts), not the service's modes[1].
    (["--adaptive", "--budget", "3", "--candidates", "{cands}"], "--candidates {cands} line 4 (hot): emc_mhz=9999"),
])
def test_adaptive_bad_flags_exit_2(tmp_path, capsys, args, text):
    cands = tmp_path / "cands.csv"
    cands.write_text("mode,cpu_cores,cpu_mhz,gpu_mhz,emc_mhz\nok,8,2265.6,1377,2133\n\nhot,8,2265.6,1377,9999\n")
    args, text = [a.format(cands=cands) for a in args], text.format(cands=cands)
    base = {"--device": "sim:agx-xavier"}
    rest = list(args)
    if "--device" in rest:
        i = rest.index("--device")
        base["--device"] = rest[i + 1]
        del rest[i:i + 2]
    argv = ["profile", "--device", base["--device"], "--workload", "lenet5-mnist", *rest, "--minibatches", "2",
            "--warmup", "0", "--no-progress", "--out", str(tmp_path / "x.csv")]
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse refuses a value outside a flag's choices itself
        code = exc.code
    assert code == 2
    assert text in capsys.readouterr().err


@pytest.mark.parametrize("out", ["plan.csv", "plan.csv.json"])
def test_profile_refuses_to_write_over_the_modes_it_reads(tmp_path, capsys, out):
    plan = tmp_path / "plan.csv"
    plan.write_text("mode,cpu_cores,cpu_mhz,gpu_mhz,emc_mhz\nx,4,1200,670,1333\n")
    argv = ["profile", "--device", "sim:agx-xavier", "--workload", "lenet5-mnist", "--modes", str(plan),
            "--minibatches", "2", "--no-progress", "--out", str(tmp_path / out)]
    assert main(argv) == 2
    assert "which --modes reads" in capsys.readouterr().err
    assert plan.read_text().startswith("mode,cpu_cores") and not (tmp_path / "plan.csv.json").exists()


def test_a_json_mode_file_names_the_bad_item_by_its_index(tmp_path, capsys):
    modes = tmp_path / "modes.json"
    modes.write_text('[{"mode": "x", "cpu_cores": 4, "cpu_mhz": 1200, "gpu_mhz": 670, "emc_mhz": 1333},'
                     ' {"mode": "y", "cpu_cores": 40, "cpu_mhz": 1200, "gpu_mhz": 670, "emc_mhz": 1333}]')
    argv = ["profile", "--device", "sim:agx-xavier", "--workload", "lenet5-mnist", "--modes", str(modes),
            "--minibatches", "2", "--no-progress", "--out", str(tmp_path / "p.csv")]
    assert main(argv) == 2
    assert f"--modes {modes} item 1: cpu_cores=40" in capsys.readouterr().err


def test_an_unwritable_out_is_refused_before_the_first_mode(tmp_path, capsys):
    (tmp_path / "a-file").write_text("not a folder")
    argv = ["profile", "--device", "sim:agx-xavier", "--workload", "lenet5-mnist", "--modes", "MODE_10W",
            "--minibatches", "2", "--no-progress", "--out", str(tmp_path / "a-file" / "p.csv")]
    assert main(argv) == 2
    assert f"cannot write --out {tmp_path / 'a-file' / 'p.csv'}" in capsys.readouterr().err


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a symlink another owner needs root")
def test_a_sidecar_name_another_user_planted_as_a_link_is_refused_before_the_first_mode(tmp_path, capsys):
    # `sudo jetpredict profile --out /tmp/p.csv` writes p.csv.json too: another user's link there (in a
    # world-writable, sticky folder) replaced a root-owned file with the profile's JSON.
    important = tmp_path / "important.txt"
    important.write_text("root:x:0:0\n")
    shared = tmp_path / "tmp"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    (shared / "p.csv.json").symlink_to(important)
    os.lchown(shared / "p.csv.json", 65534, 65534)
    argv = ["profile", "--device", "sim:agx-xavier", "--workload", "lenet5-mnist", "--modes", "MODE_10W",
            "--minibatches", "2", "--no-progress", "--out", str(shared / "p.csv")]
    assert main(argv) == 2
    said = capsys.readouterr().err
    assert f"{shared / 'p.csv.json'} is a symlink of another user" in said and "profiled" not in said, said
    assert important.read_text() == "root:x:0:0\n" and not (shared / "p.csv").exists()


def test_a_failed_final_restore_tells_the_command_that_puts_the_mode_back(fake_root, tmp_path, capsys,
                                                                          monkeypatch):
    from jetpredict.models.catalogue import load_device
    from jetpredict.profiler.powermode import state as state_file

    monkeypatch.delenv(state_file.STATE_DIR_ENV, raising=False)
    fake_root.add_jetson(load_device("agx-xavier"), preset_id=3)  # MODE_30W_ALL in force
    monkeypatch.setenv("FAKE_NVPMODEL_FAIL", "3")  # switching to MAXN works; putting MODE_30W_ALL back fails
    rc = main(["profile", "--device", "jetson", "--workload", "lenet5-mnist", "--modes", "MAXN",
               "--batch-size", "2", "--workers", "0", "--warmup", "0", "--minibatches", "1",
               "--settle-s", "0", "--no-progress", "--out", str(tmp_path / "p.csv")])
    err = capsys.readouterr().err
    assert rc == 1, err
    saved = fake_root.real("/var/lib/jetpredict") / state_file.STATE_FILE_NAME
    assert "could not put back the original power mode MODE_30W_ALL on agx-xavier" in err
    assert f"{saved} keeps it; to put it back, run: " in err
    assert f"JETPREDICT_SYSFS_ROOT={fake_root.path} jetpredict restore" in err
    assert fake_root.read("/var/lib/nvpmodel/status") == "pmode:0000" and saved.is_file()
    monkeypatch.delenv("FAKE_NVPMODEL_FAIL")
    assert main(["restore"]) == 0
    assert fake_root.read("/var/lib/nvpmodel/status") == "pmode:0003" and not saved.exists()


@pytest.mark.parametrize(("out", "said"), [
    ("", "--out is empty"), (".", "--out . is a directory"), ("/", "--out / is a directory"),
    ("..", "--out .. is a directory"), ("new-folder/", "--out new-folder/ is a directory"),
    ("sub/.", "--out sub/. is a directory"),
], ids=["empty", "dot", "root", "dotdot", "trailing-slash", "trailing-dot"])
def test_an_out_that_names_no_file_exits_2_before_any_switch(fake_root, tmp_path, capsys, monkeypatch, out, said):
    from jetpredict.models.catalogue import load_device

    fake_root.add_jetson(load_device("agx-xavier"), preset_id=3)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    argv = ["profile", "--device", "jetson", "--workload", "lenet5-mnist", "--modes", "MAXN", "--no-progress",
            "--out", out]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"jetpredict profile: error: {said}: give a file" in err and "Traceback" not in err
    assert fake_root.calls() == []  # refused before the controller: no query, no switch
    assert sorted(p.name for p in tmp_path.iterdir()) == ["root", "sub"]  # nothing written


def test_an_out_that_is_a_fifo_is_refused_and_a_symlink_is_followed(tmp_path, capsys):
    """A device or FIFO (``--out /dev/null``) was replaced by a regular file beside a new ``null.json``; a
    symlink was replaced by a regular file, where ``fit`` and ``predict`` write the file it names."""
    argv = ["profile", "--device", "sim:agx-xavier", "--workload", "lenet5-mnist", "--modes", "MODE_10W",
            "--minibatches", "2", "--no-progress", "--out"]
    fifo = tmp_path / "pipe.csv"
    os.mkfifo(fifo)
    assert main([*argv, str(fifo)]) == 2
    assert f"--out {fifo} is not a regular file" in capsys.readouterr().err
    assert stat.S_ISFIFO(fifo.stat().st_mode) and not (tmp_path / "pipe.csv.json").exists()
    (tmp_path / "runs").mkdir()
    link = tmp_path / "latest.csv"
    link.symlink_to(tmp_path / "runs" / "run1.csv")
    assert main([*argv, str(link)]) == 0
    assert link.is_symlink() and (tmp_path / "runs" / "run1.csv").read_text().startswith("device,workload,mode,")


def _profile_help(**register_kwargs) -> tuple[dict, str]:
    """``profile``'s flags by option string, as :func:`profiler.cli.register` builds them, and its help as
    printed (white space joined)."""
    import argparse

    from jetpredict.profiler import cli as profiler_cli

    sub = argparse.ArgumentParser().add_subparsers()
    profiler_cli.register(sub, **register_kwargs)
    profile = sub.choices["profile"]
    return {s: a for a in profile._actions for s in a.option_strings}, " ".join(profile.format_help().split())


def _flag_help(text: str, flag: str) -> str:
    """The help of ``flag`` in ``text`` (from the flag to the next one)."""
    return text[text.index(f" {flag} "):].split(" --", 2)[1]


def test_adaptive_help_states_the_rules_the_command_line_passes():
    from jetpredict.profiler.cli import AdaptiveRules

    rules = AdaptiveRules(objectives=("fast", "cheap"), default_objective="cheap", max_rival_gain=0.05)
    flags, text = _profile_help(adaptive=lambda *_a, **_k: None, rules=rules)
    assert flags["--objective"].choices == ("fast", "cheap") and "(default cheap)" in _flag_help(text, "--objective")
    # --target-width is one of the stop's conditions, not the stop rule.
    stop = _flag_help(text, "--target-width")
    assert "by more than 5% of the objective" in stop and "the recommended mode itself is profiled" in stop


def test_adaptive_help_states_no_value_of_the_predictor_it_was_not_given():
    """The profiler does not import the predictor: without the rules its help names no objective or bar."""
    flags, text = _profile_help()
    assert flags["--objective"].choices is None
    for flag in ("--objective", "--target-width"):
        assert not any(word in _flag_help(text, flag) for word in ("min-time", "min-energy", "%")), flag
    assert "the recommended mode itself is profiled" in _flag_help(text, "--target-width")


def test_the_jetpredict_command_line_passes_the_predictors_rules():
    from jetpredict.predictor.limits import DEFAULT_OBJECTIVE, MAX_RIVAL_GAIN, OBJECTIVES

    from jetpredict.cli import build_parser

    profile = build_parser()._subparsers._group_actions[0].choices["profile"]
    flags = {s: a for a in profile._actions for s in a.option_strings}
    assert flags["--objective"].choices == tuple(OBJECTIVES)
    assert f"(default {DEFAULT_OBJECTIVE})" in flags["--objective"].help
    assert f"{MAX_RIVAL_GAIN * 100:g}%%" in flags["--target-width"].help


@pytest.mark.parametrize("suffix", [".csv", ".json"])
def test_profile_refuses_modes_of_another_device(tmp_path, capsys, suffix):
    """A profile document is a valid --modes file; one of another board lists that board's modes (its
    preset names among them), which --candidates and predict --modes refused and --modes ran as custom."""
    import json

    modes = tmp_path / f"nano{suffix}"
    row = {"device": "orin-nano", "mode": "7W", "cpu_cores": 4, "cpu_mhz": 960, "gpu_mhz": 408, "emc_mhz": 2133}
    if suffix == ".json":
        modes.write_text(json.dumps({"rows": [row]}))
    else:
        modes.write_text(",".join(row) + "\n" + ",".join(map(str, row.values())) + "\n")
    argv = ["profile", "--device", "sim:agx-xavier", "--workload", "lenet5-mnist", "--modes", str(modes),
            "--minibatches", "2", "--warmup", "0", "--no-progress", "--out", str(tmp_path / "x.csv")]
    assert main(argv) == 2
    assert "is for device 'orin-nano', not 'agx-xavier'" in capsys.readouterr().err
    assert not (tmp_path / "x.csv").exists()


def test_an_adaptive_sidecar_keeps_the_round_that_stopped_the_loop(tmp_path, capsys):
    """The stop comes after the last mode is written: the sidecar is written once more, so that it says why
    the campaign stopped, as the command did."""
    out = tmp_path / "p.csv"
    rc = main(["profile", "--device", "sim:orin-nano", "--workload", "lenet5-mnist", "--adaptive",
               "--budget", "2", "--target-width", "0.000001", "--modes", "7W", "--warmup", "1",
               "--minibatches", "3", "--no-progress", "--out", str(out)])
    assert rc == 0 and "stop: budget of 2 profiled modes spent" in capsys.readouterr().err
    adaptive = json.loads(Path(f"{out}.json").read_text())["adaptive"]
    assert "budget of 2 profiled modes spent" in str(adaptive["stop"]), adaptive["stop"]
    assert len(adaptive["steps"]) == 2 and adaptive["steps"][-1]["stop"] == adaptive["stop"]


@pytest.mark.parametrize("folder", ["p.csv", "p.csv.json"])
def test_an_out_or_sidecar_that_is_an_existing_folder_exits_2_before_any_mode(tmp_path, capsys, measured, folder):
    """A folder where --out or its sidecar would go is bad input, said before the first mode is measured, not a
    failed write (exit 1) after it."""
    (tmp_path / folder).mkdir()
    argv = ["profile", "--device", "sim:agx-xavier", "--workload", "lenet5-mnist", "--modes", "MODE_10W",
            "--minibatches", "2", "--no-progress", "--out", str(tmp_path / "p.csv")]
    assert main(argv) == 2
    assert f"--out {tmp_path / folder} is a directory" in capsys.readouterr().err
    assert measured == [] and sorted(p.name for p in tmp_path.iterdir()) == [folder]


def test_profile_help_states_the_factory_contract_and_host_thread_counts():
    """What a `module.path:factory` returns, and the epoch size assumed without dataset_size, are said where
    users read (the epilog), as are the host's --modes thread counts."""
    from jetpredict.profiler.builtin_workloads import DEFAULT_SYNTHETIC_SAMPLES

    flags, text = _profile_help()
    for said in ("takes no arguments", "(model, input_shape, num_classes)", "'dataset_size'",
                 "'minibatches_per_epoch'", "'optimizer'", "'batches'", "'loss'",
                 f"{DEFAULT_SYNTHETIC_SAMPLES:,} samples per epoch",
                 "3125 minibatches at batch 16"):
        assert said in text, said
    assert "on the host comma-separated thread counts such as 1,2" in text  # said "one mode with all cores"


def test_a_named_board_off_a_jetson_is_told_of_the_twin(fake_root, tmp_path, capsys, monkeypatch):
    """$JETPREDICT_DEVICE names the board but does not make this machine one: the failure said only "is L4T
    installed on this Jetson?", not that the twin profiles without one."""
    monkeypatch.setenv("JETPREDICT_DEVICE", "agx-xavier")
    monkeypatch.setenv("PATH", str(fake_root.bin))
    code = main(["profile", "--device", "jetson", "--workload", "lenet5-mnist", "--modes", "MAXN", "--warmup", "0",
                 "--minibatches", "1", "--no-progress", "--out", str(tmp_path / "p.csv")])
    err = capsys.readouterr().err
    assert code == 1 and "nvpmodel not found on PATH" in err
    assert "does not make this machine one" in err and "--device sim:DEVICE" in err and "--dry-run" in err


def test_a_machine_of_no_known_board_is_told_of_the_twin(tmp_path, capsys, monkeypatch):
    """Off a Jetson (no device-tree model under the sysfs root) ``--device jetson`` says both ways on."""
    monkeypatch.delenv("JETPREDICT_DEVICE", raising=False)
    monkeypatch.setenv("JETPREDICT_SYSFS_ROOT", str(tmp_path / "not-a-jetson"))
    code = main(["profile", "--device", "jetson", "--workload", "lenet5-mnist", "--modes", "MAXN", "--no-progress",
                 "--out", str(tmp_path / "p.csv")])
    err = capsys.readouterr().err
    assert code == 2 and "cannot tell the Jetson type" in err, err
    assert "set JETPREDICT_DEVICE to a catalogue id, or profile on the digital twin with --device sim:DEVICE" in err
    assert not (tmp_path / "p.csv").exists()
