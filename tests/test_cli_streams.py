"""The command line driven as unattended scripts drive it: ``--out /dev/stdout`` into a pipe, a closed standard
output or error, file names outside ASCII under an ASCII locale. Each runs the installed console script."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.test_cli_devices import console_script

#: A verb that writes a table without a model file: cheap and on every machine.
PLAN = ("plan", "--device", "agx-xavier", "--budget", "4")
#: An environment whose file-system and standard-stream encoding is ASCII (no UTF-8 mode, no coerced locale).
ASCII_LOCALE = {"LC_ALL": "C", "LANG": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0"}


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JETPREDICT_", "LC_", "PYTHONUTF8"))}
    return {**env, **extra}


def _run(args: tuple[str, ...] | list[str], redirect: str = "", cwd: Path | None = None,
         env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    """The console script with ``args`` under bash, ``redirect`` appended (``>&-`` closes standard output)."""
    return subprocess.run(["bash", "-c", f'exec "$0" "$@" {redirect}', console_script(), *args],
                          capture_output=True, timeout=120, cwd=cwd, env=env or _env())


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_out_dev_stdout_into_a_pipe_writes_the_table_there(fmt):
    """`plan --out /dev/stdout | cat`: /dev/stdout is a link to ``pipe:[N]``; it failed with 'No such file or
    directory' (exit 2)."""
    piped = _run([*PLAN, "--format", fmt, "--out", "/dev/stdout"])
    plain = _run([*PLAN, "--format", fmt])
    assert piped.returncode == 0, piped.stderr.decode()
    assert piped.stdout == plain.stdout and len(plain.stdout) > 0
    if fmt == "json":
        assert len(json.loads(piped.stdout)) == 4
    else:
        assert len(list(csv.DictReader(io.StringIO(piped.stdout.decode())))) == 4


def test_out_dev_stderr_into_a_pipe():
    done = _run([*PLAN, "--format", "csv", "--out", "/dev/stderr"])
    assert done.returncode == 0 and done.stdout == b""
    lines = done.stderr.decode().splitlines()  # the summary lines, then the table
    assert len(lines[[line.startswith("mode,") for line in lines].index(True):]) == 5


@pytest.mark.parametrize("args", [("devices",), ("devices", "--format", "json"), (*PLAN, "--format", "csv"),
                                  (*PLAN, "--format", "json"), ("apply", "--mode", "MAXN", "--board", "agx-xavier",
                                                                "--dry-run"), ("status", "--format", "json")],
                         ids=["devices table", "devices json", "plan csv", "plan json", "apply dry run",
                              "status json"])
def test_a_closed_standard_output_fails_a_verb_that_writes_its_answer_there(args):
    """With no standard output, csv went nowhere with exit 0 and json ended in a traceback."""
    done = _run(args, ">&-")
    err = done.stderr.decode()
    assert done.returncode == 1, err
    assert "standard output is closed" in err and "Traceback" not in err
    assert len(err.splitlines()) == 1


def test_a_closed_standard_output_does_not_stop_a_verb_writing_out(tmp_path):
    done = _run([*PLAN, "--out", "plan.csv"], ">&-", cwd=tmp_path)
    assert done.returncode == 0, done.stderr.decode()
    assert len((tmp_path / "plan.csv").read_text().splitlines()) == 5


def test_with_both_closed_a_verb_writing_out_runs_on(tmp_path):
    """Both closed: standard error takes /dev/null on fd 2 whatever number the open gave it (1, the lowest
    free); else writing a message to the closed fd 2 failed the run."""
    done = _run([*PLAN, "--out", "plan.csv"], ">&- 2>&-", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout == done.stderr == b""
    assert len((tmp_path / "plan.csv").read_text().splitlines()) == 5


def test_with_both_closed_the_verb_fails_without_a_word():
    done = _run(("devices", "--format", "csv"), ">&- 2>&-")
    assert done.returncode == 1 and done.stdout == done.stderr == b""


def test_a_closed_standard_error_leaves_the_answer_and_a_profile_whole(tmp_path):
    """`profile ... 2>&-` failed: its progress bar wrote to the missing standard error."""
    plan = _run([*PLAN, "--format", "csv"], "2>&-")
    assert plan.returncode == 0 and len(plan.stdout.decode().splitlines()) == 5
    done = _run(["profile", "--device", "sim:agx-xavier", "--workload", "lenet5-mnist", "--modes", "MAXN",
                 "--warmup", "1", "--minibatches", "3", "--out", "p.csv"], "2>&-", cwd=tmp_path)
    assert done.returncode == 0, done.stdout.decode()
    assert len((tmp_path / "p.csv").read_text().splitlines()) == 2


def test_a_name_outside_ascii_under_an_ascii_locale_is_written(tmp_path):
    """`--out prëd.csv` with LC_ALL=C: the temporary name beside it failed to encode (a traceback)."""
    done = _run([*PLAN, "--out", "prëd.csv"], cwd=tmp_path, env=_env(**ASCII_LOCALE))
    assert done.returncode == 0, done.stderr.decode()
    assert os.listdir(tmp_path) == ["prëd.csv"]
    assert len((tmp_path / "prëd.csv").read_text().splitlines()) == 5


def test_a_label_an_ascii_standard_output_cannot_take_is_one_line_of_error(tmp_path):
    """A mode label outside ASCII written to an ASCII standard output: a traceback (UnicodeEncodeError) before."""
    (tmp_path / "cand.csv").write_text("mode,cpu_cores,cpu_mhz,gpu_mhz,emc_mhz\nmodé,8,2265.6,1377,2133\n"
                                       "modê,8,1190.4,1377,2133\n", encoding="utf-8")
    done = _run(["plan", "--device", "agx-xavier", "--budget", "2", "--candidates", "cand.csv", "--format", "csv"],
                cwd=tmp_path, env=_env(**ASCII_LOCALE))
    err = done.stderr.decode("ascii")
    assert done.returncode == 2 and "Traceback" not in err
    last = err.splitlines()[-1]
    assert last.startswith("jetpredict plan: error: '\\xe") and "cannot be encoded in this locale's encoding, ascii" in last
    assert "LC_ALL=C.UTF-8" in last
