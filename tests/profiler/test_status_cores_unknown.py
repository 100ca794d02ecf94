"""``jetpredict status`` where no CPU is readable in sysfs: cores online are unknown (null, with the reason in
``unknown``), not 0 (a running Jetson has at least one core online), and so is the mode's label."""

from __future__ import annotations

import json
import shutil

from jetpredict.models.catalogue import load_device
from jetpredict.profiler.status import read_status

from jetpredict.cli import main

CPU = "/sys/devices/system/cpu"


def test_no_readable_cpu_is_unknown_cores_not_zero(fake_root, capsys):
    fake_root.add_jetson(load_device("orin-nano"), preset_id=0)
    shutil.rmtree(fake_root.real(CPU))
    status = read_status()
    assert status.cores_online is None and status.cores_total == 6
    assert "cores_online" in status.unknown and CPU in status.unknown["cores_online"]
    assert status.mode_label is None
    assert main(["status", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["cores_online"] is None and doc["unknown"]["cores_online"] == status.unknown["cores_online"]
    assert main(["status"]) == 0
    assert f"cores online:  unknown ({status.unknown['cores_online']}) of 6" in capsys.readouterr().out


def test_readable_cpus_still_count(fake_root):
    fake_root.add_jetson(load_device("orin-nano"), preset_id=0)
    fake_root.write(f"{CPU}/cpu5/online", 0)
    status = read_status()
    assert status.cores_online == 5 and "cores_online" not in status.unknown
