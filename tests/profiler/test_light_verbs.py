"""``jetpredict apply`` and ``jetpredict restore`` start without pandas: restore is what a user runs after a crash
left a Jetson in another power mode, and pandas (with pyarrow) was ~0.6 s of its ~0.9 s start. Each verb runs in a
fresh process on the fake Jetson, which reports the modules it loaded as it exits."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

#: Third-party modules neither verb needs: the tables and profile rows of the other verbs load them.
TABLE_LIBRARIES = ("pandas", "pyarrow", "scipy")

#: Runs ``python -m jetpredict ARGS`` as the console does; at exit, writes the top-level modules then loaded
#: (to the file named by the first argument), whatever the verb's exit status.
RUN_AND_LIST = """
import atexit, json, runpy, sys
where = sys.argv.pop(1)
atexit.register(lambda: open(where, "w").write(json.dumps(sorted({m.split(".")[0] for m in sys.modules}))))
sys.argv[0] = "jetpredict"
runpy.run_module("jetpredict", run_name="__main__", alter_sys=True)
"""


def _run(root, tmp_path, *args: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    listed = tmp_path / "modules.json"
    listed.unlink(missing_ok=True)
    done = subprocess.run([sys.executable, "-c", RUN_AND_LIST, str(listed), *args], env=root.run_env(),
                          capture_output=True, text=True, timeout=120)
    return done, json.loads(listed.read_text())


@pytest.mark.parametrize("args", [("--mode", "MODE_15W", "--dry-run"), ("--mode", "6c-1497.6-905.25-1600", "--dry-run")],
                         ids=["preset", "custom-label"])
def test_a_dry_run_of_apply_loads_no_table_library(xavier_30w, tmp_path, args):
    done, loaded = _run(xavier_30w, tmp_path, "apply", *args)
    assert done.returncode == 0, done.stderr
    assert "Nothing was changed" in done.stdout
    assert [m for m in TABLE_LIBRARIES if m in loaded] == []


def test_apply_then_restore_load_no_table_library(xavier_30w, tmp_path):
    done, loaded = _run(xavier_30w, tmp_path, "apply", "--mode", "MODE_15W")
    assert done.returncode == 0, done.stderr
    assert xavier_30w.read("/var/lib/nvpmodel/status") == "pmode:0002"
    assert [m for m in TABLE_LIBRARIES if m in loaded] == []

    done, loaded = _run(xavier_30w, tmp_path, "restore")
    assert done.returncode == 0, done.stderr
    assert "restored the original power mode MODE_30W_ALL on agx-xavier" in done.stderr
    assert [m for m in TABLE_LIBRARIES if m in loaded] == []


def test_restore_with_nothing_to_restore_loads_no_table_library(xavier_30w, tmp_path):
    done, loaded = _run(xavier_30w, tmp_path, "restore")
    assert done.returncode == 0 and "nothing to restore" in done.stderr
    assert [m for m in TABLE_LIBRARIES if m in loaded] == []


def test_the_verbs_that_write_tables_still_load_them(fake_root, tmp_path):
    """The check can fail: ``devices`` writes a table, so pandas is in its list."""
    done, loaded = _run(fake_root, tmp_path, "devices", "--format", "csv")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("device,") and "pandas" in loaded
