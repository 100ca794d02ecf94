"""On a multi-GPU host the NVML meter reads the GPU that trains: CUDA numbers GPUs its own way
(``CUDA_VISIBLE_DEVICES``, fastest first), NVML by PCI bus, so the meter opens the training device by its UUID.

A stand-in pynvml with two GPUs and torch's CUDA device properties as on such a host (the library and CUDA
need an NVIDIA driver); the meter and detection code run as they would there.
"""

from __future__ import annotations

import types

import pytest
import torch
from jetpredict.profiler.power import NvmlMeter, detect_power_meter

UUIDS = ("GPU-0b1c5a1e-2f67-4d0e-9a51-63a1cbd0aa10", "GPU-7d3f9e42-88c1-4b2a-b7d4-f10e2c6b5e21")
POWER_MW = (60_000, 300_000)  # NVML GPU 0 idles at 60 W; GPU 1, the one training, draws 300 W


class FakeNvmlError(Exception):
    pass


def two_gpu_pynvml() -> types.SimpleNamespace:
    """pynvml on a host with two GPUs (handles are NVML indices); ``opened`` records each handle asked for."""
    mod = types.SimpleNamespace(opened=[])

    def by_index(i: int) -> int:
        mod.opened.append(i)
        return i

    def by_uuid(uuid: bytes | str) -> int:
        text = uuid.decode() if isinstance(uuid, bytes) else uuid
        if text not in UUIDS:
            raise FakeNvmlError("Not Found")
        return by_index(UUIDS.index(text))

    mod.nvmlInit = mod.nvmlShutdown = lambda: None
    mod.nvmlDeviceGetCount = lambda: len(UUIDS)
    mod.nvmlDeviceGetHandleByIndex = by_index
    mod.nvmlDeviceGetHandleByUUID = by_uuid
    mod.nvmlDeviceGetIndex = lambda handle: handle
    mod.nvmlDeviceGetPowerUsage = lambda handle: POWER_MW[handle]
    mod.nvmlDeviceGetTotalEnergyConsumption = lambda handle: 0
    return mod


class TorchUuid:
    """torch's ``_CUuuid``: its text is the UUID without NVML's ``GPU-`` prefix."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __str__(self) -> str:
        return self.text


@pytest.fixture
def nvml(monkeypatch):
    mod = two_gpu_pynvml()
    monkeypatch.setattr("jetpredict.profiler.power.nvml._load_pynvml", lambda: mod)
    return mod


def cuda_sees(monkeypatch, *uuids: str) -> None:
    """torch's CUDA devices as ``CUDA_VISIBLE_DEVICES`` leaves them: cuda:0 is ``uuids[0]``, ..."""
    def properties(device):
        index = device.index if isinstance(device, torch.device) else int(device)
        if index is None:
            index = 0
        if not 0 <= index < len(uuids):
            raise AssertionError("Invalid device id")  # what torch raises
        return types.SimpleNamespace(uuid=TorchUuid(uuids[index].removeprefix("GPU-")))

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", properties)


def test_the_training_gpu_is_read_by_its_uuid_not_nvml_index_0(nvml, monkeypatch):
    cuda_sees(monkeypatch, UUIDS[1])  # CUDA_VISIBLE_DEVICES=1: torch's cuda:0 is NVML's GPU 1
    for device in ("cuda", "cuda:0"):
        with detect_power_meter(device) as meter:
            assert meter.name == "nvml:gpu1"
            assert meter.read_power_w() == pytest.approx(300.0)
    assert 0 not in nvml.opened


def test_cuda_numbering_is_torchs_not_nvmls(nvml, monkeypatch):
    cuda_sees(monkeypatch, UUIDS[1], UUIDS[0])  # fastest first: cuda:1 is NVML's GPU 0
    with detect_power_meter("cuda:1") as meter:
        assert meter.name == "nvml:gpu0" and meter.read_power_w() == pytest.approx(60.0)


def test_a_uuid_nvml_does_not_know_gives_null_power_with_a_reason(nvml, monkeypatch):
    cuda_sees(monkeypatch, "GPU-ffffffff-0000-0000-0000-000000000000")  # a GPU NVML cannot see (e.g. a MIG slice)
    meter = detect_power_meter("cuda")
    assert not meter.available and nvml.opened == []  # never another GPU's power
    assert "GPU-ffffffff-0000-0000-0000-000000000000" in meter.name and "cuda" in meter.name


def test_a_cuda_device_torch_cannot_name_gives_null_power_with_a_reason(nvml, monkeypatch):
    cuda_sees(monkeypatch, UUIDS[0])
    meter = detect_power_meter("cuda:3")
    assert not meter.available and nvml.opened == []
    assert "cuda:3" in meter.name
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    meter = detect_power_meter("cuda")
    assert not meter.available and nvml.opened == [] and "CUDA" in meter.name


def test_an_nvml_index_still_opens_that_gpu(nvml, monkeypatch):
    assert detect_power_meter("gpu1").read_power_w() == pytest.approx(300.0)
    cuda_sees(monkeypatch, UUIDS[0])
    with NvmlMeter(nvml=nvml, cuda_device="cuda:0") as meter:
        assert meter.name == "nvml:gpu0" and meter.rails == ("gpu0",)
