"""The privileged-command wrapper: timeouts, missing tools, failures and sudo, with clear messages."""

from __future__ import annotations

import pytest
from jetpredict.profiler.powermode import PrivilegedCommandError, privileged, run_privileged, write_sysfs


def test_runs_a_tool_from_the_fake_root(fake_root):
    fake_root.install_tool("nvpmodel", "import sys\nprint('NV Power Mode: MAXN')\nprint(0)\n")
    assert run_privileged(["nvpmodel", "-q"]).stdout.splitlines() == ["NV Power Mode: MAXN", "0"]


def test_missing_tool(fake_root, monkeypatch):
    monkeypatch.setenv("PATH", str(fake_root.bin))
    with pytest.raises(PrivilegedCommandError, match="nvpmodel not found on PATH"):
        run_privileged(["nvpmodel", "-q"])


def test_timeout(fake_root):
    fake_root.install_tool("jetson_clocks", "import time\ntime.sleep(30)\n")
    with pytest.raises(PrivilegedCommandError, match="did not finish within 0.5 s"):
        run_privileged(["jetson_clocks"], timeout_s=0.5)


def test_non_zero_exit_carries_the_tool_message(fake_root):
    fake_root.install_tool("nvpmodel", "import sys\nprint('NVPM ERROR: bad mode', file=sys.stderr)\nsys.exit(3)\n")
    with pytest.raises(PrivilegedCommandError, match="exit 3: NVPM ERROR: bad mode") as err:
        run_privileged(["nvpmodel", "-m", "9"])
    assert err.value.returncode == 3 and err.value.argv == ["nvpmodel", "-m", "9"]
    assert run_privileged(["nvpmodel", "-m", "9"], check=False).returncode == 3


def test_not_root_goes_through_sudo_and_explains_a_refusal(fake_root, monkeypatch):
    fake_root.install_tool("nvpmodel", "print('ok')\n")
    fake_root.install_tool("sudo", "import json, pathlib, sys\n"
                           "pathlib.Path(__file__).with_name('sudo.log').write_text(json.dumps(sys.argv[1:]))\n"
                           "print('sudo: a password is required', file=sys.stderr)\nsys.exit(1)\n")
    monkeypatch.setattr(privileged, "is_root", lambda: False)
    monkeypatch.setattr(privileged.sysfs, "is_fake_root", lambda: False)  # behave as on a real Jetson
    monkeypatch.setenv("PATH", str(fake_root.bin))
    with pytest.raises(PrivilegedCommandError, match="needs root"):
        run_privileged(["nvpmodel", "-m", "0"])
    logged = (fake_root.bin / "sudo.log").read_text()
    assert '"-n"' in logged and logged.endswith('"-m", "0"]')


def test_sysfs_write_errors_are_explained(fake_root, monkeypatch):
    def denied(*_):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(privileged.sysfs, "write_text", denied)
    monkeypatch.setattr(privileged, "is_root", lambda: False)  # as root the file itself refuses: test_powermode_readonly
    with pytest.raises(PrivilegedCommandError, match="needs root"):
        write_sysfs("/sys/devices/system/cpu/cpu1/online", 0)


def test_a_tool_never_reads_our_stdin(fake_root):
    """nvpmodel asks "enter YES/yes" before a switch that reboots: a piped "yes" must not reach it."""
    import os
    import subprocess
    import sys

    fake_root.install_tool("nvpmodel", "import sys\nprint('read:', repr(sys.stdin.read()))\n")
    env = fake_root.env()
    env["PYTHONPATH"] = os.pathsep.join([os.getcwd(), env.get("PYTHONPATH", "")])
    code = "from jetpredict.profiler.powermode import run_privileged\nprint(run_privileged(['nvpmodel', '-m', '2']).stdout)"
    child = subprocess.run([sys.executable, "-c", code], input="YES\nyes\n", env=env, capture_output=True,
                           text=True, timeout=60)
    assert child.returncode == 0, child.stderr
    assert "read: ''" in child.stdout
