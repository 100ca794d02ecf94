"""Fixtures for the profiler hardware tests: a fake device root per test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_tools import GATED_NVPMODEL
from fakes import ORIGINAL_ID
from jetpredict.models.catalogue import load_device
from jetpredict.profiler.powermode.state import STATE_DIR_ENV

FIXTURES = Path(__file__).with_name("fixtures")


@pytest.fixture
def orin_nano(fake_root, monkeypatch):
    """The fake root as an Orin Nano in 15W (nvpmodel id 0; 7W is id 1) whose governors idle at their minimum
    after a switch (what jetson_clocks pins against); runs keep their state under the root."""
    monkeypatch.delenv(STATE_DIR_ENV, raising=False)
    fake_root.add_jetson(load_device("orin-nano"))
    fake_root.idle_clocks()
    return fake_root


@pytest.fixture
def xavier_30w(fake_root, monkeypatch):
    """The fake root as an AGX Xavier in MODE_30W_ALL (nvpmodel id 3: neither the default nor a mode the
    tests switch to) with a fake nvpmodel a test can hold or slow down (``GATED_NVPMODEL``); runs keep their
    state under the root (:meth:`FakeRoot.state_dir`), as children started with ``FakeRoot.run_env`` do."""
    monkeypatch.delenv(STATE_DIR_ENV, raising=False)
    device = load_device("agx-xavier")
    fake_root.add_jetson(device, preset_id=ORIGINAL_ID)
    fake_root.install_tool("nvpmodel", GATED_NVPMODEL.replace("@SOC@", device.specs.soc))
    return fake_root


@pytest.fixture
def measured(monkeypatch) -> list[str]:
    """The modes the twin (``SimulatedRunner``) measured, in order."""
    from jetpredict.profiler.sim.runner import SimulatedRunner

    modes: list[str] = []
    run_mode = SimulatedRunner.run_mode

    def spy(self, mode, *a, **kw):
        modes.append(mode.mode)
        return run_mode(self, mode, *a, **kw)

    monkeypatch.setattr(SimulatedRunner, "run_mode", spy)
    return modes


@pytest.fixture(scope="session")
def tegrastats_samples() -> list[dict]:
    return json.loads((FIXTURES / "tegrastats_samples.json").read_text())["samples"]


@pytest.fixture
def torch_one_thread():
    """Run torch on one intra-op thread: on two shared cores more threads spin against other processes."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
