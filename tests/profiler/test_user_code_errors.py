"""``profile --workload module:factory`` when the user's own code fails: one clear message naming the file and
line (exit 2 while loading it, before any mode; exit 1 while training, naming the mode and minibatch)."""

from __future__ import annotations

import csv
import sys

import pytest
from jetpredict.models.catalogue import load_device
from jetpredict.profiler.powermode.state import STATE_DIR_ENV
from jetpredict.profiler.sim.backend import SimulatedBackend

from jetpredict.cli import main

pytestmark = pytest.mark.usefixtures("torch_one_thread")

#: Each module's name is its own: a failed import is not cached, a loaded one would be.
LOAD_FAILURES = {
    "syntax_slip": ("def make(:\n    pass\n", 1, "SyntaxError: invalid syntax"),
    "raises_on_import": ("import math\n\nraise ValueError('no config file next to the model')\n", 3,
                         "ValueError: no config file next to the model"),
    "factory_raises": ("def make():\n    raise ValueError('width must be even')\n", 2,
                       "ValueError: width must be even"),
}

#: A factory whose optimizer(params) raises (line 6), and one whose dataset's first sample does (line 9).
OPTIMIZER_RAISES = '''from torch import nn


def adam(params):
    list(params)
    raise TypeError('lr must be a float')


def make():
    return {"model": nn.Linear(4, 2), "input_shape": (4,), "num_classes": 2, "optimizer": adam}
'''
SAMPLE_RAISES = '''from torch import nn
from torch.utils.data import Dataset


class Broken(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, index):
        raise OSError('cannot open sample_0.npy')


def make():
    return {"model": nn.Linear(4, 2), "dataset": Broken(), "loss": nn.CrossEntropyLoss()}
'''

FAILING_FORWARD = '''from torch import nn


class Failing(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3 * 8 * 8, 5)

    def forward(self, x):
        raise {error}


def make():
    return Failing(), (3, 8, 8), 5
'''


def _profile(tmp_path, workload: str) -> list[str]:
    return ["profile", "--device", "host", "--workload", workload, "--modes", "1", "--batch-size", "2",
            "--workers", "0", "--warmup", "1", "--minibatches", "2", "--no-progress", "--out", str(tmp_path / "p.csv")]


@pytest.fixture
def user_dir(tmp_path, monkeypatch):
    """The user's working directory, where their model file lies; sys.path is put back after the test (the
    profiler appends the working directory to it)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    return tmp_path


@pytest.mark.parametrize("module", list(LOAD_FAILURES))
def test_a_model_file_that_fails_to_load_exits_2_naming_the_file_and_line(user_dir, capsys, module):
    """A syntax error, an exception at import or one from the factory printed ~40 lines of jetpredict's own
    traceback and exited 1 (a missing dependency already had one line and exit 2)."""
    text, line, said = LOAD_FAILURES[module]
    (user_dir / f"{module}.py").write_text(text)
    assert main(_profile(user_dir, f"{module}:make")) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"jetpredict profile: error: --workload '{module}:make': "), err
    assert f"{user_dir / module}.py:{line}" in err and said in err, err
    assert not (user_dir / "p.csv").exists()


#: A user module's import chain that fails two ways: the module it imports raises, or imports what is missing.
DEEP_FAILURES = {"raises": ("CONFIG = {}\nwidth = CONFIG['width']\n", "_deep.py:2", "KeyError: 'width'"),
                 "missing": ("import no_such_module_xyz\n", "", "No module named 'no_such_module_xyz'")}


@pytest.mark.parametrize("failure", list(DEEP_FAILURES))
@pytest.mark.parametrize("debug", [False, True], ids=["one-line", "JETPREDICT_DEBUG=1"])
def test_a_model_file_that_fails_deep_in_its_imports_shows_the_chain_under_debug(user_dir, capsys, monkeypatch,
                                                                                    debug, failure):
    """The one line names the innermost file and line (or the missing module); a user tracing an import chain
    needs the whole chain, which JETPREDICT_DEBUG=1 prints (before, only failures while profiling did), and the
    exit stays 2."""
    deep, where, said = DEEP_FAILURES[failure]
    name = f"chain_{failure}_{int(debug)}"  # one module per case: a failed import is not cached
    (user_dir / f"{name}_deep.py").write_text(deep)
    (user_dir / f"{name}.py").write_text(f"import {name}_deep\n\n\ndef make():\n    pass\n")
    if debug:
        monkeypatch.setenv("JETPREDICT_DEBUG", "1")
    else:
        monkeypatch.delenv("JETPREDICT_DEBUG", raising=False)
    assert main(_profile(user_dir, f"{name}:make")) == 2
    err = capsys.readouterr().err
    assert (not where or f"{user_dir / name}{where}" in err) and said in err, err
    assert err.rstrip().splitlines()[-1].startswith("jetpredict profile: error: --workload"), err
    if debug:
        assert "Traceback (most recent call last)" in err and f'{user_dir / name}.py", line 1' in err, err
    else:
        assert "Traceback" not in err, err


@pytest.mark.parametrize("error, hint", [
    ("RuntimeError('CUDA out of memory. Tried to allocate 2.00 GiB')", True),
    ("ValueError('shapes do not match')", False),
])
def test_a_forward_that_fails_names_the_workload_mode_minibatch_and_line(user_dir, capsys, error, hint):
    """It printed only ``failed: <message>`` (a ValueError: a traceback); out of memory suggests a smaller batch."""
    module = "oom_forward" if hint else "bad_forward"
    (user_dir / f"{module}.py").write_text(FAILING_FORWARD.format(error=error))
    assert main(_profile(user_dir, f"{module}:make")) == 1
    err = capsys.readouterr().err
    said = (f"jetpredict profile: failed: workload '{module}:make' failed at mode host-1c, warm-up minibatch 1 of "
            f"1, at {user_dir / module}.py:10: ")
    assert said in err, err
    assert ("try a smaller --batch-size than 2" in err) is hint
    assert "no mode was finished: nothing was written" in err and not (user_dir / "p.csv").exists()


@pytest.mark.parametrize("module, text, line, said", [
    ("optimizer_raises", OPTIMIZER_RAISES, 6, "its optimizer(params) failed"),
    ("sample_raises", SAMPLE_RAISES, 10, "reading its first sample failed"),
])
def test_an_optimizer_or_first_sample_that_fails_exits_2_naming_the_file_and_line(user_dir, capsys, module, text,
                                                                                  line, said):
    """The factory's optimizer and the dataset's first sample run before any mode: the user's code, exit 2."""
    (user_dir / f"{module}.py").write_text(text)
    assert main(_profile(user_dir, f"{module}:make")) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"jetpredict profile: error: --workload '{module}:make': {said} at "
                          f"{user_dir / module}.py:{line}: "), err
    assert not (user_dir / "p.csv").exists()


#: A dataset whose first sample reads (the complexity count's) but whose fourth does not (line 13).
FOURTH_SAMPLE_RAISES = SAMPLE_RAISES.replace("        raise OSError", """        if index < 3:
            return torch.zeros(4), 0
        raise OSError""").replace("from torch import nn", "import torch\nfrom torch import nn")


def test_a_dataset_that_fails_while_the_mode_gets_its_data_ready_names_the_mode_and_line(user_dir, capsys):
    """Each mode times the dataset's samples before its warm-up: a failure there is training's (exit 1)."""
    (user_dir / "fourth_sample.py").write_text(FOURTH_SAMPLE_RAISES)
    assert main(_profile(user_dir, "fourth_sample:make")) == 1
    err = capsys.readouterr().err
    assert err.startswith("jetpredict profile: failed: workload 'fourth_sample:make' failed at mode host-1c, while "
                          f"getting its data ready, at {user_dir}/fourth_sample.py:13: OSError: cannot open "
                          "sample_0.npy; no mode was finished"), err


#: A forward that fails once the fake board is in nvpmodel id 3 (Orin NX 25W, the second mode profiled).
FAILS_AT_25W = '''import os
from pathlib import Path

from torch import nn


class At25W(nn.Linear):
    def forward(self, x):
        if Path(os.environ["JETPREDICT_SYSFS_ROOT"], "var/lib/nvpmodel/status").read_text().strip() == "pmode:0003":
            raise RuntimeError('CUDA error: an illegal memory access was encountered')
        return super().forward(x)


def make():
    return At25W(4, 2), (4,), 2
'''


def test_a_forward_that_fails_at_a_later_mode_keeps_the_earlier_rows_and_restores_the_mode(
        fake_root, user_dir, monkeypatch, capsys):
    """10W profiled, then 25W fails in its warm-up: exit 1 naming the mode and minibatch, 10W's row in --out,
    and the board back in 15W (the mode in force before)."""
    monkeypatch.delenv(STATE_DIR_ENV, raising=False)
    fake_root.add_jetson(load_device("orin-nx"))
    status = fake_root.read("/var/lib/nvpmodel/status")
    (user_dir / "at_25w.py").write_text(FAILS_AT_25W)
    argv = _profile(user_dir, "at_25w:make")
    argv[argv.index("host")] = "jetson"
    argv[argv.index("--modes") + 1] = "10W,25W"
    assert main([*argv, "--settle-s", "0"]) == 1
    err = capsys.readouterr().err
    out = user_dir / "p.csv"
    assert (f"workload 'at_25w:make' failed at mode 25W, warm-up minibatch 1 of 1, at {user_dir}/at_25w.py:10: "
            "RuntimeError: CUDA error") in err, err
    assert f"; the 1 mode(s) profiled before it are in {out}, {out}.json" in err, err
    with out.open() as f:
        assert [row["mode"] for row in csv.DictReader(f)] == ["10W"]
    assert fake_root.read("/var/lib/nvpmodel/status") == status == "pmode:0002"
    assert [c[2] for c in fake_root.calls() if c[:2] == ["nvpmodel", "-m"]] == ["1", "3", "2"]


def test_the_twins_failure_is_worded_as_the_twins_not_the_workloads(tmp_path, monkeypatch, capsys):
    """The twin runs none of the workload's code: a failure there is jetpredict's, named with its mode (it read
    "workload 'lenet5-mnist' failed at the mode in force")."""
    simulate = SimulatedBackend.next_minibatch

    def fails_at_25w(self):
        if self._mode.mode == "25W":
            raise FloatingPointError("overflow in exp")
        return simulate(self)

    monkeypatch.setattr(SimulatedBackend, "next_minibatch", fails_at_25w)
    argv = _profile(tmp_path, "lenet5-mnist")
    argv[argv.index("host")] = "sim:orin-nx"
    argv[argv.index("--modes") + 1] = "10W,25W"
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert ("jetpredict profile: failed: the digital twin failed simulating workload 'lenet5-mnist' at mode 25W, "
            "warm-up minibatch 1 of 1: FloatingPointError: overflow in exp") in err, err
    assert "jetpredict's own fault" in err and "--batch-size" not in err, err
    assert "the 1 mode(s) profiled before it are in" in err, err


def test_the_profile_help_says_how_to_see_the_traceback(capsys):
    with pytest.raises(SystemExit):
        main(["profile", "--help"])
    assert "JETPREDICT_DEBUG=1" in " ".join(capsys.readouterr().out.split())


#: A factory's values that are wrong, each: (what the factory returns, the key named, its rule). Each ran into
#: torch or jetpredict's own code: a traceback (dataset_size, input_shape), a trained mode refused by the row
#: check (minibatches_per_epoch) or a ZeroDivisionError blamed on the user's first sample (num_classes 0).
BAD_FACTORY_VALUES = {
    "size_negative": ('{"model": nn.Linear(4, 2), "input_shape": (4,), "num_classes": 2, "dataset_size": -5}',
                      "dataset_size", "an integer >= 1"),
    "size_bool": ('{"model": nn.Linear(4, 2), "input_shape": (4,), "num_classes": 2, "dataset_size": True}',
                  "dataset_size", "an integer >= 1"),
    "shape_text": ('nn.Linear(4, 2), "abc", 2', "input_shape", "a non-empty sequence of integers >= 1"),
    "shape_empty": ('nn.Linear(4, 2), (), 2', "input_shape", "a non-empty sequence of integers >= 1"),
    "shape_zero": ('nn.Linear(4, 2), (4, 0), 2', "input_shape", "a non-empty sequence of integers >= 1"),
    "classes_zero": ('nn.Linear(4, 2), (4,), 0', "num_classes", "an integer >= 1"),
    "classes_float": ('nn.Linear(4, 2), (4,), 2.5', "num_classes", "an integer >= 1"),
    "minibatches_negative": ('{"model": nn.Linear(4, 2), "input_shape": (4,), "num_classes": 2, '
                             '"minibatches_per_epoch": -3}', "minibatches_per_epoch", "an integer >= 1"),
}


@pytest.mark.parametrize("case", list(BAD_FACTORY_VALUES))
def test_a_factorys_bad_value_exits_2_naming_the_key_and_rule_before_training(user_dir, capsys, monkeypatch, case):
    returned, key, rule = BAD_FACTORY_VALUES[case]
    monkeypatch.delenv("JETPREDICT_DEBUG", raising=False)
    module = f"bad_value_{case}"
    (user_dir / f"{module}.py").write_text(f"from torch import nn\n\n\ndef make():\n    return {returned}\n")
    assert main(_profile(user_dir, f"{module}:make")) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"jetpredict profile: error: --workload '{module}:make': its factory make() returned "
                          f"{key}="), err
    assert rule in err and "Traceback" not in err and "at mode" not in err, err
    assert not (user_dir / "p.csv").exists()


def test_every_refusal_of_a_factorys_result_names_the_flag(user_dir, capsys):
    (user_dir / "model_only.py").write_text("from torch import nn\n\n\ndef make():\n    return nn.Linear(4, 2)\n")
    assert main(_profile(user_dir, "model_only:make")) == 2
    err = capsys.readouterr().err
    assert err.startswith("jetpredict profile: error: --workload 'model_only:make': its factory make() returned "
                          "only a model"), err


EMPTY_DATASET = '''from torch import nn
from torch.utils.data import Dataset


class Empty(Dataset):
    def __len__(self):
        return 0

    def __getitem__(self, index):
        raise IndexError(index)


def make():
    return {"model": nn.Linear(4, 2), "dataset": Empty(), "loss": nn.CrossEntropyLoss()}
'''


def test_an_empty_dataset_is_named_as_the_workloads_not_the_batch_sizes(user_dir, capsys):
    """It read '--batch-size 2 is larger than the dataset (0 samples)': no batch size fits an empty dataset."""
    (user_dir / "empty_data.py").write_text(EMPTY_DATASET)
    assert main(_profile(user_dir, "empty_data:make")) == 2
    err = capsys.readouterr().err
    assert err.startswith("jetpredict profile: error: --workload 'empty_data:make': its dataset is empty "
                          "(0 samples)"), err
    assert "--batch-size" not in err and not (user_dir / "p.csv").exists()


#: A loss that is NaN or inf from the first minibatch (a diverged model): its times are not the workload's.
DIVERGED = '''import torch
from torch import nn


def make():
    return {{"model": nn.Linear(4, 2), "input_shape": (4,), "num_classes": 2,
             "loss": lambda out, target: out.sum() * torch.tensor({value})}}
'''


@pytest.mark.parametrize("value, warmup, step", [
    ("float('nan')", "1", "warm-up minibatch 1 of 1"),
    ("float('inf')", "1", "warm-up minibatch 1 of 1"),
    ("float('nan')", "0", "measured minibatch 1 of 2"),
], ids=["nan", "inf", "nan-no-warmup"])
def test_a_loss_that_is_not_finite_fails_the_mode_and_writes_nothing(user_dir, capsys, value, warmup, step):
    """A NaN/inf loss was profiled as a normal measured row."""
    module = f"diverged_{value[7:10]}_{warmup}"
    (user_dir / f"{module}.py").write_text(DIVERGED.format(value=value))
    argv = _profile(user_dir, f"{module}:make")
    argv[argv.index("--warmup") + 1] = warmup
    assert main(argv) == 1
    err = capsys.readouterr().err
    said = value[7:10]
    assert (f"jetpredict profile: failed: workload '{module}:make' failed at mode host-1c, {step}: "
            f"FloatingPointError: loss is {said}") in err, err
    assert "no mode was finished: nothing was written" in err and not (user_dir / "p.csv").exists()


#: A model whose first layer takes 32 features, given inputs of 31 (line 5): its forward fails.
BAD_SHAPE = '''from torch import nn


def make():
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 2))
    return model, (31,), 2
'''


def test_a_model_that_fails_while_the_twin_traces_it_names_the_workload_step_and_what_was_written(user_dir,
                                                                                                   capsys):
    """The twin traces one training step of a user model before any mode: a failure there printed only torch's
    message (``failed: mat1 and mat2 shapes cannot be multiplied``), naming neither the workload nor the step."""
    (user_dir / "bad_shape.py").write_text(BAD_SHAPE)
    argv = _profile(user_dir, "bad_shape:make")
    argv[argv.index("host")] = "sim:agx-xavier"
    argv[argv.index("--modes") + 1] = "MAXN"
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("jetpredict profile: failed: --workload 'bad_shape:make': tracing one training step "
                          "failed"), err
    assert "RuntimeError: mat1 and mat2 shapes cannot be multiplied" in err, err
    assert err.rstrip().endswith("no mode was finished: nothing was written (an existing --out is as it was)"), err
    assert not (user_dir / "p.csv").exists()
