"""``profile --workload module:factory`` when the user's own code fails: one clear message naming the file and
line (exit 2 while loading it, before any mode; exit 1 while training, naming the mode and minibatch)."""

from __future__ import annotations

import sys

import pytest

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


def test_the_profile_help_says_how_to_see_the_traceback(capsys):
    with pytest.raises(SystemExit):
        main(["profile", "--help"])
    assert "JETPREDICT_DEBUG=1" in " ".join(capsys.readouterr().out.split())
