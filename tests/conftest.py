"""Fixtures shared by every test folder: a fake device root (sysfs, nvpmodel, tegrastats) per test; loopback
HTTP stubs for the client tests and the waits the client would sleep; how many processes ``-n auto`` starts."""

from __future__ import annotations

import os
import types
from pathlib import Path

import pytest
from client_stub import Stub

from tests.profiler.fakes import FakeRoot


@pytest.fixture
def fake_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeRoot:
    """An empty fake root; ``JETPREDICT_SYSFS_ROOT`` points at it for the test."""
    root = FakeRoot(tmp_path / "root")
    monkeypatch.setenv("JETPREDICT_SYSFS_ROOT", str(root.path))
    return root


@pytest.fixture
def stub():
    """Makes loopback ``Stub`` servers for ``jetpredict.client`` tests (``client_stub.py``); closes them after."""
    made: list[Stub] = []

    def make(script, upstream=None, sleep_s=0.0) -> Stub:
        made.append(Stub(script, upstream, sleep_s))
        return made[-1]

    yield make
    for s in made:
        s.close()


@pytest.fixture
def waits(monkeypatch) -> list[float]:
    """The waits ``jetpredict.client`` sleeps between attempts (s), in order; none is slept."""
    import jetpredict.client as client_module

    slept: list[float] = []
    monkeypatch.setattr(client_module, "time", types.SimpleNamespace(sleep=slept.append))
    monkeypatch.setattr(client_module, "random", types.SimpleNamespace(uniform=lambda low, high: high))
    return slept


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto`` (the default, ``pyproject.toml``): one test process more than the usable cores. The tests wait
    on servers, browsers and subprocesses about a quarter of the time (the suite held 150% of 2 cores with
    2 processes), and a third process fills those waits; a fourth gained nothing consistent in two pairs of
    runs (README), and costs one more process's memory."""
    return len(os.sched_getaffinity(0)) + 1 if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1) + 1
