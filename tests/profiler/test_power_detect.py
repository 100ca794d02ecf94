"""Auto-detection picks the best meter present and falls back to a null meter that says why."""

from __future__ import annotations

import pytest
from jetpredict.profiler.power import NullPowerMeter, PowerReadError, detect_power_meter


@pytest.fixture
def no_nvml(monkeypatch):
    def missing():
        raise ImportError("No module named 'pynvml'")
    monkeypatch.setattr("jetpredict.profiler.power.nvml._load_pynvml", missing)


def test_nothing_present_gives_a_null_meter_naming_every_reason(fake_root, no_nvml, monkeypatch):
    monkeypatch.setenv("PATH", str(fake_root.bin))
    meter = detect_power_meter()
    assert not meter.available
    assert any("INA3221" in t for t in meter.tried) and any("tegrastats" in t for t in meter.tried)
    # The row's power_meter says why each candidate failed, not a generic "no sensor found".
    assert meter.name == "none: " + "; ".join(meter.tried)
    assert "nvml: nvidia-ml-py not installed" in meter.name


def test_a_failed_nvml_names_its_own_reason(fake_root, monkeypatch):
    class NoLibrary:  # pynvml is installed but libnvidia-ml.so is not
        @staticmethod
        def nvmlInit():
            raise RuntimeError("NVML Shared Library Not Found")
    monkeypatch.setattr("jetpredict.profiler.power.nvml._load_pynvml", lambda: NoLibrary)
    meter = detect_power_meter("cuda")
    assert meter.name == "none: nvml: cannot initialise (NVML Shared Library Not Found)"
    with pytest.raises(PowerReadError):
        meter.read_power_w()


def test_ina3221_is_preferred_over_tegrastats(fake_root, no_nvml, tegrastats_samples):
    fake_root.add_tegrastats([tegrastats_samples[0]["line"]])
    fake_root.add_ina3221_iio("6-0040", 0, [("POM_5V_IN", 4000), ("POM_5V_GPU", 900), ("POM_5V_CPU", 700)])
    meter = detect_power_meter("nano")
    assert meter.name == "ina3221:POM_5V_IN" and meter.available
    assert fake_root.calls() == []  # tegrastats was never started


def test_tegrastats_is_used_when_sysfs_has_no_ina3221(fake_root, no_nvml, tegrastats_samples):
    fake_root.add_tegrastats([tegrastats_samples[1]["line"]])
    with detect_power_meter() as meter:
        assert meter.name == "tegrastats:sum(GPU,CPU,SOC,CV,VDDRQ,SYS5V)"
        assert meter.read_power_w() == pytest.approx(7.632)


def test_null_meter_reason_and_domain():
    null = NullPowerMeter("rapl: root only", domain="cpu_package")
    assert null.name == "none: rapl: root only" and null.domain == "cpu_package"


def test_every_meter_and_trace_measures_one_of_the_named_domains():
    from jetpredict.profiler.power import Ina3221Meter, NvmlMeter, PowerTrace, RaplMeter, TegrastatsMeter
    from jetpredict.profiler.power.base import DOMAINS

    assert {m.domain for m in (Ina3221Meter, TegrastatsMeter, NvmlMeter, RaplMeter)} == set(DOMAINS)
    assert NullPowerMeter().domain in DOMAINS and PowerTrace([], []).domain in DOMAINS
    # A misspelt domain would be written to every row's sidecar: refused where it is given.
    with pytest.raises(ValueError, match="domain 'cpu' must be one of module, gpu, cpu_package"):
        NullPowerMeter("none", domain="cpu")
    with pytest.raises(ValueError, match="domain 'GPU' must be one of"):
        PowerTrace([], [], domain="GPU")
