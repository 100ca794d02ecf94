"""Power meters (INA3221, tegrastats, NVML, RAPL, none), a background sampler and the trace it records."""

from jetpredict.profiler.power.base import (
    MIN_SAMPLER_HZ,
    MIN_SAMPLES_PER_WINDOW,
    NullPowerMeter,
    PowerMeter,
    PowerReadError,
    PowerTrace,
)
from jetpredict.profiler.power.detect import detect_cpu_package_meter, detect_power_meter
from jetpredict.profiler.power.ina3221 import Ina3221Meter
from jetpredict.profiler.power.nvml import NvmlMeter
from jetpredict.profiler.power.rapl import RaplMeter
from jetpredict.profiler.power.sampler import PowerSampler, hz_for_window
from jetpredict.profiler.power.tegrastats import TegrastatsMeter, parse_tegrastats_line

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
