"""Defaults shared by the power meters, their sampler and the measurement windows, defined once.

A leaf module (it imports nothing): :mod:`profiler.metering` promises not to import the power package
(nor its sampler) until a meter is there to sample, and the power package must not import metering
(metering imports the sampler), so neither of them can hold these for the other.
"""

#: The default power-sampling rate, Hz.
DEFAULT_SAMPLER_HZ = 10.0
#: The sampler's rates, Hz: MLPerf Power asks for at least 1 Hz; above 1 kHz sensor reads cost more time
#: than they add (INA3221 rails update about every 1-10 ms). Checked by the sampler and by the run settings.
MIN_SAMPLER_HZ = 1.0
MAX_SAMPLER_HZ = 1000.0
#: Why a null meter reads nothing when no sensor was found.
NO_SENSOR_REASON = "no sensor found"
#: The meter name (``power_meter`` column) without any meter: a null meter's ``none: <reason>``.
NO_METER = f"none: {NO_SENSOR_REASON}"
