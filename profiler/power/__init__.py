"""Power meters (INA3221, tegrastats, NVML, RAPL, none), a background sampler and the trace it records."""

from profiler.power.base import (
    MIN_SAMPLER_HZ,
    MIN_SAMPLES_PER_WINDOW,
    NullPowerMeter,
    PowerMeter,
    PowerReadError,
    PowerTrace,
)
from profiler.power.detect import detect_cpu_package_meter, detect_power_meter
from profiler.power.ina3221 import Ina3221Meter
from profiler.power.nvml import NvmlMeter
from profiler.power.rapl import RaplMeter
from profiler.power.sampler import PowerSampler, hz_for_window
from profiler.power.tegrastats import TegrastatsMeter, parse_tegrastats_line

__all__ = [
    "MIN_SAMPLER_HZ",
    "MIN_SAMPLES_PER_WINDOW",
    "Ina3221Meter",
    "NullPowerMeter",
    "NvmlMeter",
    "PowerMeter",
    "PowerReadError",
    "PowerSampler",
    "PowerTrace",
    "RaplMeter",
    "TegrastatsMeter",
    "detect_cpu_package_meter",
    "detect_power_meter",
    "hz_for_window",
    "parse_tegrastats_line",
]
