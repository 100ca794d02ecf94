"""What a Jetson kernel does with the clock files of the tests' fake device roots (:mod:`fakes`).

:func:`governor_step` is the step its DVFS governors run a clock at between its limits;
:func:`kernel_refusal` says why it refuses (EINVAL) a write to a cpufreq or devfreq file;
:func:`install_kernel_rules` makes jetpredict's own sysfs writes in this process obey that, and
:data:`KERNEL_RULES_SITE` is a sitecustomize doing the same in a child process (``FakeRoot.run_env``).
The fake ``nvpmodel`` and ``jetson_clocks`` scripts embed the source of both functions and :data:`LIMIT_FILES`
(``fake_tools._FAKE_COMMON``), so one rule serves the test's process, its children and the tools.
"""

from __future__ import annotations

import inspect
import re


def governor_step(steps: list[int], bottom: int, top: int, level: str) -> int:
    """The step of ``steps`` a governor runs between the ``bottom`` and ``top`` limits (kHz or Hz): the highest
    at or below ``top`` (a cap off the table runs at the step below it: GPU 670 -> 624.75 MHz), or at ``level``
    "min" the lowest at or above ``bottom``, never above that one; the limit itself without a table."""
    if not steps:
        return top if level == "max" else bottom
    under = max((f for f in steps if f <= top), default=min(steps))
    return under if level == "max" else min(under, min((f for f in steps if f >= bottom), default=max(steps)))


#: The sysfs clock limits the kernel checks against their partner in force (L4T's 4.9 cpufreq and devfreq).
LIMIT_FILES = ("min_freq", "max_freq", "scaling_min_freq", "scaling_max_freq")


def kernel_refusal(read, device_path: str, value: object, limits: bool = True) -> str | None:
    """Why a Jetson kernel refuses (EINVAL) writing ``value`` to the sysfs file ``device_path``, or None when it
    takes it; ``read(device_path)`` is a file's text in force (None: missing). Refused: any cpufreq file of an
    offline CPU (each fake CPU is a policy of its own, and a policy with no CPU online takes no writes) and, with
    ``limits``, a max below the min in force or a min above the max in force."""
    cpu = re.fullmatch(r"/sys/devices/system/cpu/cpu(\d+)/cpufreq/\w+", device_path)
    if cpu and read(f"/sys/devices/system/cpu/cpu{cpu.group(1)}/online") not in (None, "1"):
        return f"cpu{cpu.group(1)} is offline"
    folder, name = device_path.rsplit("/", 1)
    if not limits or name not in LIMIT_FILES:
        return None
    lowering = "max" in name  # a max may not go below the min, a min not above the max
    partner = read(f"{folder}/{name.replace('max', 'min') if lowering else name.replace('min', 'max')}")
    try:
        new, limit = int(str(value).split()[0]), int(partner.split()[0])
    except (AttributeError, IndexError, ValueError):
        return None  # no partner file, or not numbers: nothing to check against
    if new < limit if lowering else new > limit:
        return f"{name} {new} {'below the min' if lowering else 'above the max'} in force, {limit}"
    return None


def install_kernel_rules() -> None:
    """Make this process's sysfs writes (``profiler.sysfs.write_text``) under a fake root fail as the kernel's
    do, with EINVAL where :func:`kernel_refusal` refuses; once per process, and only while a fake root is set.
    The fakes' own set-up (:meth:`fakes.FakeRoot.write`) writes past it: a test may build any state."""
    import errno

    from jetpredict.profiler import sysfs

    if getattr(sysfs.write_text, "kernel_rules", False):
        return
    plain = sysfs.write_text

    def write_text(device_path, value: object) -> None:
        if sysfs.is_fake_root():
            where = device_path if isinstance(device_path, str) else sysfs.unroot(device_path)
            why = kernel_refusal(sysfs.read_text, where, value)
            if why is not None:
                raise OSError(errno.EINVAL, f"Invalid argument ({why})", str(sysfs.path(where)))
        plain(device_path, value)

    write_text.kernel_rules = True
    sysfs.write_text = write_text


#: A child's sitecustomize (FakeRoot.run_env): the kernel's refusals for a jetpredict run in another process.
KERNEL_RULES_SITE = ("import re\nLIMIT_FILES = " + repr(LIMIT_FILES) + "\n" + inspect.getsource(kernel_refusal)
                     + inspect.getsource(install_kernel_rules) + "install_kernel_rules()\n")
