"""The twin refuses a batch whose minibatch cannot fit in the device's memory, as a real board would fail
(out of memory), instead of simulating it; batches that fit are simulated as before."""

from __future__ import annotations

import pytest
from jetpredict.models.catalogue import load_device
from jetpredict.models.errors import InputError
from jetpredict.profiler import sim
from jetpredict.profiler.sim.backend import OS_RESERVED_GB, minibatch_bytes

from jetpredict.cli import main


def test_vgg11_at_batch_4096_does_not_fit_a_4gb_nano():
    with pytest.raises(InputError) as err:
        sim.simulated_rig("nano", "vgg11-cifar10", batch_size=4096)
    assert err.value.field == "batch_size"
    text = str(err.value)
    assert "--batch-size 4096" in text and "4 GB" in text and f"{OS_RESERVED_GB:g} GB" in text


def test_the_same_batch_fits_a_32gb_agx_xavier():
    rig = sim.simulated_rig("agx-xavier", "vgg11-cifar10", batch_size=4096)
    assert rig.backend.batch_size == 4096


def test_the_estimate_grows_with_the_batch_and_stays_within_the_device_below_it():
    wc = sim.simulated_rig("nano", "vgg11-cifar10").backend.wc
    usable = (load_device("nano").specs.memory_gb - OS_RESERVED_GB) * 1e9
    assert minibatch_bytes(wc, 16) < minibatch_bytes(wc, 512) < usable < minibatch_bytes(wc, 4096)


def test_the_cli_exits_2_naming_the_batch(tmp_path, capsys):
    rc = main(["profile", "--device", "sim:nano", "--workload", "vgg11-cifar10", "--modes", "presets",
               "--batch-size", "4096", "--out", str(tmp_path / "x.csv"), "--no-progress"])
    assert rc == 2 and "--batch-size" in capsys.readouterr().err
    assert not (tmp_path / "x.csv").exists()
