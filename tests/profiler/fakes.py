"""Fake Jetson / x86 machines for the profiler's hardware tests.

:class:`FakeRoot` builds a sysfs tree under a temporary directory (point ``JETPREDICT_SYSFS_ROOT`` at it)
and installs fake ``nvpmodel``, ``jetson_clocks`` and ``tegrastats`` executables under ``<root>/usr/bin``
(:mod:`fake_tools`). The fakes are small Python scripts that append every call to ``<root>/calls.log`` (one JSON list per
line) and keep their state in the tree itself, so tests check both the calls and their effect. The tree
refuses what a Jetson kernel refuses (:mod:`fake_kernel`) to the sysfs writes of jetpredict, in the test's
process and in the children it starts with :meth:`FakeRoot.run_env`; a test's own set-up writes anything.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from jetpredict.models.catalogue import Device
from jetpredict.profiler.backends import MinibatchTiming, TrainingBackend
from jetpredict.profiler.power import NullPowerMeter, PowerMeter, PowerReadError
from jetpredict.profiler.powermode import detect_controller

from tests.profiler.fake_kernel import (
    KERNEL_RULES_SITE,
    governor_step,
    install_kernel_rules,
)
from tests.profiler.fake_tools import (
    CPU_DIR,
    EMC_BPMP,
    EMC_CAP,
    EMC_T210,
    FAKE_JETSON_CLOCKS,
    FAKE_NVPMODEL,
    FAKE_TEGRASTATS,
    FAKE_TEGRASTATS_TIMED,
    GPU_DIRS,
    IDLE_CLOCKS_MARKER,
    PIN_SIGNAL_MARKER,
    nvpmodel_conf_for,
)
from tools.testing import wait_until

#: Real device-tree strings per catalogued board: ``(/proc/device-tree/model, compatible entries)``.
#: nano: L4T r32 devkit - model from rbonghi/jetson_stats#48 (JetPack 4.3), compatible as printed by an
#:   L4T r32.7.6 devkit (janesser/kirkstone-jetson-nano README.md).
#: agx-xavier: model "Jetson-AGX" of L4T 32.2+ (Adafruit_Python_PlatformDetect#37: 32.1 reads
#:   "jetson-xavier"); compatible of the devkit (carrier P2972) in Linux tegra194-p2972-0000.dts.
#: xavier-nx, orin-nx, orin-nano: Linux arch/arm64/boot/dts/nvidia tegra194-p3509-0000+p3668-0000.dts,
#:   tegra234-p3768-0000+p3767-0000.dts, tegra234-p3768-0000+p3767-0005.dts (model and compatible).
#: orin-agx: model of Linux tegra234-p3737-0000+p3701-0000.dts; compatible read on an AGX Orin 64GB devkit
#:   (NVIDIA/jetson-gpio#125).
DEVICE_TREES: dict[str, tuple[str, tuple[str, ...]]] = {
    "nano": ("NVIDIA Jetson Nano Developer Kit",
             ("nvidia,p3449-0000-b00+p3448-0000-b00", "nvidia,jetson-nano", "nvidia,tegra210")),
    "agx-xavier": ("Jetson-AGX", ("nvidia,p2972-0000", "nvidia,tegra194")),
    "xavier-nx": ("NVIDIA Jetson Xavier NX Developer Kit", ("nvidia,p3509-0000+p3668-0000", "nvidia,tegra194")),
    "orin-agx": ("NVIDIA Jetson AGX Orin Developer Kit",
                 ("nvidia,p3737-0000+p3701-0005", "nvidia,p3701-0005", "nvidia,tegra234", "nvidia,tegra23x")),
    "orin-nx": ("NVIDIA Jetson Orin NX Engineering Reference Developer Kit",
                ("nvidia,p3768-0000+p3767-0000", "nvidia,p3767-0000", "nvidia,tegra234")),
    "orin-nano": ("NVIDIA Jetson Orin Nano Developer Kit",
                  ("nvidia,p3768-0000+p3767-0005", "nvidia,p3767-0005", "nvidia,tegra234")),
}


def emc_rate_path(soc: str) -> str:
    return f"{EMC_T210}/clk_rate" if soc == "T210" else f"{EMC_BPMP}/rate"


class FakeRoot:
    """A fake device tree rooted at ``path``."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.bin = self.path / "usr" / "bin"
        self.bin.mkdir(parents=True, exist_ok=True)
        self.calls_log = self.path / "calls.log"
        install_kernel_rules()  # the code under test writes sysfs in this process: the kernel's refusals apply
        # As on every systemd board: the folder of the device-wide power-mode lock, open to every user.
        self.real("/run/lock").mkdir(parents=True, exist_ok=True)
        os.chmod(self.real("/run/lock"), 0o1777)

    # --- plain files ------------------------------------------------------------------------------

    def real(self, device_path: str) -> Path:
        return self.path / device_path.lstrip("/")

    def write(self, device_path: str, value: object) -> Path:
        p = self.real(device_path)
        p.parent.mkdir(parents=True, exist_ok=True)
        # Atomic like a sysfs attribute: a reader never sees a half-written value.
        tmp = p.with_name(f".{p.name}.tmp")
        tmp.write_text(f"{value}\n")
        os.replace(tmp, p)
        return p

    def read(self, device_path: str) -> str:
        return self.real(device_path).read_text().strip()

    def read_int(self, device_path: str) -> int:
        return int(self.read(device_path))

    def calls(self) -> list[list[str]]:
        """Every recorded call of a fake executable: ``[tool, arg1, ...]``."""
        if not self.calls_log.exists():
            return []
        return [json.loads(line) for line in self.calls_log.read_text().splitlines() if line.strip()]

    # --- power sensors ----------------------------------------------------------------------------

    def add_ina3221_hwmon(self, bus_addr: str, hwmon: int, rails: list[tuple[str, float, float]]) -> Path:
        """JetPack 5/6 layout: ``in<ch>_label``, ``in<ch>_input`` (mV), ``curr<ch>_input`` (mA), ch from 1."""
        d = f"/sys/bus/i2c/drivers/ina3221/{bus_addr}/hwmon/hwmon{hwmon}"
        for ch, (label, mv, ma) in enumerate(rails, 1):
            self.write(f"{d}/in{ch}_label", label)
            self.write(f"{d}/in{ch}_input", int(mv))
            self.write(f"{d}/curr{ch}_input", int(ma))
        return self.real(d)

    def add_ina3221_iio(self, bus_addr: str, device: int, rails: list[tuple[str, float]]) -> Path:
        """JetPack 4 layout: ``rail_name_<ch>``, ``in_power<ch>_input`` (mW), ch from 0."""
        d = f"/sys/bus/i2c/drivers/ina3221x/{bus_addr}/iio:device{device}"
        for ch, (label, mw) in enumerate(rails):
            self.write(f"{d}/rail_name_{ch}", label)
            self.write(f"{d}/in_power{ch}_input", int(mw))
        return self.real(d)

    def add_rapl(self, packages: list[tuple[int, int]], readable: bool = True) -> None:
        """Package zones ``intel-rapl:<n>`` with ``(energy_uj, max_energy_range_uj)``, plus a core sub-zone."""
        for n, (energy_uj, max_uj) in enumerate(packages):
            d = f"/sys/class/powercap/intel-rapl:{n}"
            self.write(f"{d}/name", f"package-{n}")
            self.write(f"{d}/max_energy_range_uj", max_uj)
            p = self.write(f"{d}/energy_uj", energy_uj)
            if not readable:
                p.unlink()  # as unreadable as a root-only file gets for a test running as root
            self.write(f"{d}:0/name", "core")
            self.write(f"{d}:0/energy_uj", 0)
            self.write(f"{d}:0/max_energy_range_uj", max_uj)

    # --- a Jetson: clocks, nvpmodel.conf and the privileged tools -------------------------------

    def add_jetson(self, device: Device, preset_id: int | None = None) -> None:
        """CPUs, GPU devfreq, EMC, device-tree model, ``/etc/nvpmodel.conf`` and the fake tools; with
        ``preset_id``, that preset in force with its clock caps."""
        soc = device.specs.soc
        cores = device.cpu_cores_range[1]
        cpu_khz = [round(f * 1e3) for f in device.cpu_steps_mhz]
        gpu_hz = [round(f * 1e6) for f in device.gpu_steps_mhz]
        emc_hz = [round(f * 1e6) for f in device.emc_steps_mhz]
        for c in range(cores):
            if c:
                self.write(f"{CPU_DIR}/cpu{c}/online", 1)
            d = f"{CPU_DIR}/cpu{c}/cpufreq"
            self.write(f"{d}/scaling_available_frequencies", " ".join(map(str, cpu_khz)))
            self.write(f"{d}/scaling_min_freq", cpu_khz[0])
            self.write(f"{d}/scaling_max_freq", cpu_khz[-1])
            self.write(f"{d}/scaling_cur_freq", cpu_khz[-1])
        g = GPU_DIRS[soc]
        self.write(f"{g}/available_frequencies", " ".join(map(str, gpu_hz)))
        self.write(f"{g}/min_freq", gpu_hz[0])
        self.write(f"{g}/max_freq", gpu_hz[-1])
        self.write(f"{g}/cur_freq", gpu_hz[-1])
        self.write(EMC_CAP, 0)
        self.write(emc_rate_path(soc), emc_hz[-1])
        self.write(f"{EMC_BPMP if soc != 'T210' else EMC_T210}/max_rate", emc_hz[-1])
        self.set_device_tree(*DEVICE_TREES[device.id])
        self.write("/etc/nvpmodel.conf", nvpmodel_conf_for(device))
        default = device.preset(device.default_preset).id if preset_id is None else preset_id
        self.write("/var/lib/nvpmodel/status", f"pmode:{default:04d}")
        if preset_id is not None:  # booted in another mode than the default: its caps are in force
            self._in_force(device, next(p for p in device.presets if p.id == preset_id))
        self.install_tool("nvpmodel", FAKE_NVPMODEL.replace("@SOC@", soc))
        self.install_tool("jetson_clocks", FAKE_JETSON_CLOCKS.replace("@SOC@", soc))

    def _in_force(self, device: Device, preset) -> None:
        """The clock caps (max frequencies, EMC cap) of the preset in force, as ``nvpmodel -m`` sets them: what
        ``jetson_clocks --store`` saves at a run's start and ``--restore`` puts back at its end. The clocks
        running now and the cores online are left to the test (it may set any)."""
        for c in range(device.cpu_cores_range[1]):
            if preset.cpu_mhz < max(device.cpu_steps_mhz):
                self.write(f"{CPU_DIR}/cpu{c}/cpufreq/scaling_max_freq", round(preset.cpu_mhz * 1e3))
        if preset.gpu_mhz < max(device.gpu_steps_mhz):
            self.write(f"{GPU_DIRS[device.specs.soc]}/max_freq", round(preset.gpu_mhz * 1e6))
        if preset.emc_mhz < max(device.emc_steps_mhz):
            self.write(EMC_CAP, round(preset.emc_mhz * 1e6))

    def set_device_tree(self, model: str | None, compatible: tuple[str, ...] | None) -> None:
        """``/proc/device-tree/model`` and ``compatible`` as the kernel exposes them (NUL-terminated
        strings); None removes the file."""
        for name, value in (("model", None if model is None else (model,)), ("compatible", compatible)):
            path = self.real(f"/proc/device-tree/{name}")
            if value is None:
                path.unlink(missing_ok=True)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text("".join(f"{v}\x00" for v in value))

    def idle_clocks(self, idle: bool = True) -> None:
        """After each switch run the CPU and GPU at their ``min`` (an idle board's DVFS governors), not at the
        cap: only a mode that pins min = max (a custom one) reads back its cap. EMC stays at its cap."""
        marker = self.path / IDLE_CLOCKS_MARKER
        if idle:
            marker.write_text("1\n")
        else:
            marker.unlink(missing_ok=True)

    def settle(self, device: Device) -> None:
        """What the kernel governors do after a direct sysfs write: run each clock at its allowed max (at its
        min after :meth:`idle_clocks`)."""
        soc = device.specs.soc
        level = "min" if (self.path / IDLE_CLOCKS_MARKER).exists() else "max"
        for c in range(device.cpu_cores_range[1]):
            online = not self.real(f"{CPU_DIR}/cpu{c}/online").exists() or self.read(f"{CPU_DIR}/cpu{c}/online") == "1"
            d = f"{CPU_DIR}/cpu{c}/cpufreq"
            if online:
                self.write(f"{d}/scaling_cur_freq", self._running(d, "scaling_available_frequencies",
                                                                  "scaling_min_freq", "scaling_max_freq", level))
        g = GPU_DIRS[soc]
        self.write(f"{g}/cur_freq", self._running(g, "available_frequencies", "min_freq", "max_freq", level))
        if not self.real(EMC_BPMP if soc != "T210" else EMC_T210).is_dir():
            return
        cap = self.read_int(EMC_CAP)
        top = self.read_int(f"{EMC_BPMP if soc != 'T210' else EMC_T210}/max_rate")
        self.write(emc_rate_path(soc), min(cap, top) if cap > 0 else top)

    def _running(self, d: str, table: str, lo: str, hi: str, level: str) -> int:
        """:func:`governor_step` of the ``d`` files ``table``, ``lo`` and ``hi`` (kHz or Hz)."""
        on_steps = self.real(f"{d}/{table}").exists()
        steps = [int(x) for x in self.read(f"{d}/{table}").split()] if on_steps else []
        return governor_step(steps, self.read_int(f"{d}/{lo}"), self.read_int(f"{d}/{hi}"), level)

    def hide_debugfs(self) -> None:
        """Take ``/sys/kernel/debug`` away, as a normal user sees it (root-only): no EMC rate to read."""
        import shutil

        shutil.rmtree(self.real("/sys/kernel/debug"), ignore_errors=True)

    def signal_in_pin(self) -> None:
        """The next pin (``jetson_clocks`` without arguments) sends SIGTERM to the process that ran it, then
        pins once that process's restore is done (state file gone) or 2 s passed, in a process of its own that
        outlives a kill of the tool (as under ``sudo``); :meth:`wait_pin` waits for it."""
        (self.path / PIN_SIGNAL_MARKER).touch()

    def wait_pin(self, timeout_s: float = 60.0) -> None:
        """Wait until the pin :meth:`signal_in_pin` set up has landed."""
        done = self.path / f"{PIN_SIGNAL_MARKER}.done"
        wait_until(done.exists, timeout_s, f"the pin did not land within {timeout_s:g} s")

    def install_tool(self, name: str, body: str) -> Path:
        p = self.bin / name
        p.write_text(f"#!{sys.executable}\n" + body)
        p.chmod(p.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        return p

    def add_tegrastats(self, lines: list[str]) -> Path:
        """A fake ``tegrastats --interval MS`` that prints ``lines`` in a loop, one per interval."""
        self.write("/var/lib/fake_tegrastats/lines.txt", "\n".join(lines))
        return self.install_tool("tegrastats", FAKE_TEGRASTATS)

    def add_timed_tegrastats(self, lines: list[str]) -> Path:
        """:meth:`add_tegrastats` that also records when it printed each line: :meth:`tegrastats_printed`."""
        self.write("/var/lib/fake_tegrastats/lines.txt", "\n".join(lines))
        return self.install_tool("tegrastats", FAKE_TEGRASTATS_TIMED)

    def tegrastats_printed(self) -> list[tuple[int, float]]:
        """``(line number from 0, time.perf_counter() s)`` of each line the timed fake printed; perf_counter is
        CLOCK_MONOTONIC on Linux, one clock for every process, so the times compare with the test's."""
        log = self.real("/var/lib/fake_tegrastats/printed.log")
        if not log.exists():
            return []
        rows = [line.split() for line in log.read_text().splitlines()]
        return [(int(row[0]), float(row[1])) for row in rows if len(row) == 2]

    # --- holding a call of the fake nvpmodel (GATED_NVPMODEL) -----------------------------------

    def hold_nvpmodel(self, what: str) -> None:
        """The next ``nvpmodel -q`` (``what`` "q") or ``-m`` ("m") waits inside until :meth:`release_nvpmodel`."""
        (self.path / f"hold_{what}").touch()

    def wait_held(self, what: str, timeout_s: float = 60.0) -> None:
        """Wait until a fake nvpmodel call is held (:meth:`hold_nvpmodel`)."""
        wait_until((self.path / f"hold_{what}.taken").exists, timeout_s,
                   f"no nvpmodel -{what} came within {timeout_s:g} s")

    def release_nvpmodel(self, what: str) -> None:
        (self.path / f"hold_{what}.taken").unlink(missing_ok=True)

    def env(self) -> dict[str, str]:
        """An environment for a child process that sees this root and its tools first on PATH."""
        env = dict(os.environ)
        env["JETPREDICT_SYSFS_ROOT"] = str(self.path)
        env["PATH"] = f"{self.bin}{os.pathsep}{env.get('PATH', '')}"
        return env

    def run_env(self) -> dict[str, str]:
        """:meth:`env` for a run of this checkout's jetpredict (the working directory early on PYTHONPATH)
        whose state file goes under this root (:meth:`state_dir`), where tests look, and whose sysfs writes
        obey :func:`kernel_refusal` as the test's own do."""
        env = self.env()
        env.pop("JETPREDICT_STATE_DIR", None)
        # The kernel's refusals in the child too: a sitecustomize (imported at start-up) installs them.
        rules = self.real("/usr/lib/fake_kernel_rules")
        rules.mkdir(parents=True, exist_ok=True)
        (rules / "sitecustomize.py").write_text(KERNEL_RULES_SITE)
        env["PYTHONPATH"] = os.pathsep.join([str(rules), os.getcwd(), env.get("PYTHONPATH", "")])
        return env

    def state_dir(self) -> Path:
        """Where a run on this root keeps its power-mode state without $JETPREDICT_STATE_DIR."""
        return self.real("/var/lib/jetpredict")

    def state_files(self) -> list[str]:
        """The names in :meth:`state_dir` and the lock folder, sorted: a run that ended cleanly leaves none (no
        lock file either)."""
        return sorted(p.name for folder in (self.state_dir(), self.real("/run/lock")) if folder.exists()
                      for p in folder.glob("*"))


class BusyRailBackend(TrainingBackend):
    """A training backend whose minibatches each take ``minibatch_s`` and load a board rail meanwhile: the
    fake INA3221 channel's current (``curr_path``, a ``curr<ch>_input`` device path) is ``busy_ma`` while a
    minibatch runs and ``idle_ma`` otherwise, as a module's input current rises while it trains."""

    workload, batch_size, num_workers, minibatches_per_epoch = "busy-rail", 4, 0, 100

    def __init__(self, root: FakeRoot, curr_path: str, idle_ma: int, busy_ma: int, minibatch_s: float) -> None:
        self.root, self.curr_path = root, curr_path
        self.idle_ma, self.busy_ma, self.minibatch_s = idle_ma, busy_ma, minibatch_s
        self.minibatches = 0
        #: (start, end) of each minibatch's busy draw (time.perf_counter s): the rail's own timeline.
        self.busy: list[tuple[float, float]] = []
        root.write(curr_path, idle_ma)

    def busy_share(self, first: int, last: int) -> float:
        """The share of the time from minibatch ``first``'s start to minibatch ``last``'s end (0-based,
        inclusive) that the rail drew its busy current: below 1 by the gaps between minibatches, which a
        loaded machine stretches (a meter's mean over that window is this share of the busy draw)."""
        window = self.busy[first:last + 1]
        return sum(end - start for start, end in window) / (window[-1][1] - window[0][0])

    def prepare(self, mode) -> None:
        pass

    def next_minibatch(self) -> MinibatchTiming:
        t0 = time.perf_counter()
        self.root.write(self.curr_path, self.busy_ma)
        busy_from = time.perf_counter()
        try:
            time.sleep(self.minibatch_s)
        finally:
            busy_to = time.perf_counter()
            self.root.write(self.curr_path, self.idle_ma)
            self.busy.append((busy_from, busy_to))
        self.minibatches += 1
        t1 = time.perf_counter()
        return MinibatchTiming(stall_s=0.0, compute_s=t1 - t0, total_s=t1 - t0, start_s=t0, end_s=t1)


#: An Orin Nano's module rail on the fake INA3221 (5 V): 1.6 A idle (8 W), 3 A while a minibatch runs (15 W).
VDD_IN_CURR = "/sys/bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon1/curr1_input"
IDLE_W, BUSY_W = 8.0, 15.0


def busy_vdd_in(root: FakeRoot, minibatch_s: float = 0.05) -> BusyRailBackend:
    """An Orin Nano's INA3221 rails on ``root``, and a backend whose minibatches (``minibatch_s`` each) raise
    its VDD_IN from :data:`IDLE_W` to :data:`BUSY_W` (50 ms: the rail drops between two of them for as long as
    a loaded 2-core machine leaves the loop descheduled, a smaller share of longer ones)."""
    root.add_ina3221_hwmon("1-0040", 1, [("VDD_IN", 5000, 1600), ("VDD_CPU_GPU_CV", 1000, 500),
                                         ("VDD_SOC", 1000, 300)])
    return BusyRailBackend(root, VDD_IN_CURR, idle_ma=1600, busy_ma=3000, minibatch_s=minibatch_s)


class LateMeter(PowerMeter):
    """A meter (tegrastats that came up late) whose reads fail until ``backend`` (a :class:`BusyRailBackend`)
    has finished its first minibatch, then read 9 W."""

    name = "tegrastats:VDD_IN"

    def __init__(self, backend: BusyRailBackend) -> None:
        self.backend = backend

    def read_power_w(self) -> float:
        if not self.backend.minibatches:
            raise PowerReadError("tegrastats silent: no line yet")
        return 9.0


class CloseCountingMeter(NullPowerMeter):
    """A meter without a sensor that counts its closes (tegrastats would stop its process, NVML shut down);
    ``fails``: each close raises, as a tegrastats that will not stop."""

    def __init__(self, fails: bool = False) -> None:
        super().__init__()
        self.fails, self.closes = fails, 0

    def close(self) -> None:
        self.closes += 1
        if self.fails:
            raise OSError("tegrastats did not stop")


#: The xavier_30w fixture's mode, in force before a run: MODE_30W_ALL (nvpmodel id 3), neither the default
#: nor a mode the tests switch to, so "back to the default" would not pass for "back to the original".
ORIGINAL_ID = 3
ORIGINAL_KNOBS = (8, 1190.4, 828.75, 1600.0)  # MODE_30W_ALL caps 1200 / 900 MHz: the steps below them


def in_original_mode(root: FakeRoot) -> None:
    """Assert the fake AGX Xavier ``root`` is back in :data:`ORIGINAL_ID` with its clocks."""
    assert root.read("/var/lib/nvpmodel/status") == f"pmode:{ORIGINAL_ID:04d}"
    assert detect_controller("jetson").read_back().knobs() == ORIGINAL_KNOBS


# `jetpredict ARGS` with SIGINT, SIGHUP and SIGQUIT at their defaults: a child inherits them ignored from a
# suite run under nohup or as a shell's background job, and the profiler leaves an ignored signal ignored.
_CLI_CHILD = textwrap.dedent("""
    import signal, sys
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for _name in ("SIGHUP", "SIGQUIT", "SIGTERM"):
        signal.signal(getattr(signal, _name), signal.SIG_DFL)
    from jetpredict.cli import main
    sys.exit(main(sys.argv[1:]))
""")


def start_python(root: FakeRoot, code: str, *args: str) -> subprocess.Popen:
    """``python -c CODE ARGS`` on the fake machine ``root`` (:meth:`FakeRoot.run_env`) in its own session (the
    test signals it alone, or its group as a terminal would); text stdout and stderr are pipes."""
    return subprocess.Popen([sys.executable, "-c", code, *args], env=root.run_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def start_cli(root: FakeRoot, *args: str) -> subprocess.Popen:
    """``jetpredict ARGS`` started as :func:`start_python` does. Its pid is the run's."""
    return start_python(root, _CLI_CHILD, *args)


def finish(child: subprocess.Popen, timeout_s: float = 120.0) -> tuple[str, str]:
    """The child's (stdout, stderr) once it ended; killed (its whole session) if it does not within the time."""
    try:
        return child.communicate(timeout=timeout_s)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()


def signal_inside_switch(root: FakeRoot, sig: int, *args: str) -> tuple[subprocess.Popen, str, str]:
    """Run ``jetpredict ARGS`` (:func:`start_cli`), send it ``sig`` while its ``nvpmodel -m`` is held (root's
    nvpmodel must be :data:`GATED_NVPMODEL`), let the switch finish and the run end: (child, stdout, stderr)."""
    root.hold_nvpmodel("m")
    child = start_cli(root, *args)
    try:
        root.wait_held("m")  # inside the switch
        child.send_signal(sig)
    finally:
        root.release_nvpmodel("m")
        out, err = finish(child)
    return child, out, err
