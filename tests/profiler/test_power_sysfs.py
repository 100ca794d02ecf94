"""profiler.sysfs: every device path is rooted at $JETPREDICT_SYSFS_ROOT; reads never raise."""

from __future__ import annotations

from pathlib import Path

from jetpredict.profiler import sysfs


def test_root_defaults_to_slash(monkeypatch):
    monkeypatch.delenv("JETPREDICT_SYSFS_ROOT", raising=False)
    assert sysfs.root() == Path("/") and not sysfs.is_fake_root()
    assert sysfs.path("/sys/class/powercap") == Path("/sys/class/powercap")


def test_paths_reads_and_writes_under_a_fake_root(fake_root):
    assert sysfs.is_fake_root()
    p = fake_root.write("/sys/devices/gpu.0/load", "512")
    assert sysfs.path("/sys/devices/gpu.0/load") == p
    assert sysfs.unroot(p) == "/sys/devices/gpu.0/load"
    assert sysfs.read_int("/sys/devices/gpu.0/load") == 512
    assert sysfs.read_int(p) == 512  # a real Path from glob()/path() is not rooted twice
    fake_root.write("/sys/x/available_frequencies", "100 200 300")
    assert sysfs.read_ints("/sys/x/available_frequencies") == [100, 200, 300]
    assert sysfs.glob("/sys/devices/gpu.*/load") == [p]
    sysfs.write_text("/sys/devices/gpu.0/load", 7)
    assert p.read_text() == "7\n"


def test_missing_or_garbage_files_read_as_none(fake_root):
    fake_root.write("/sys/bad", "not-a-number")
    assert sysfs.read_text("/sys/missing") is None
    assert sysfs.read_int("/sys/missing") is None
    assert sysfs.read_int("/sys/bad") is None
    assert sysfs.read_ints("/sys/bad") is None


def test_which_prefers_tools_under_the_fake_root(fake_root, monkeypatch):
    monkeypatch.setenv("PATH", "")
    assert sysfs.which("nvpmodel") is None
    tool = fake_root.install_tool("nvpmodel", "print('x')\n")
    assert sysfs.which("nvpmodel") == str(tool)
