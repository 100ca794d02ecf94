"""Fixtures for the profiler hardware tests: a fake device root per test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

FIXTURES = Path(__file__).with_name("fixtures")


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
