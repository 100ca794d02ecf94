"""tegrastats: a line parser for the JetPack 4, 5 and 6 formats, and a meter that runs the tool.

Formats handled (power fields are ``<instant>/<average>``):
- JetPack 4: ``... EMC_FREQ 4%@1600 GR3D_FREQ 28%@76 ... POM_5V_IN 4122/3107 POM_5V_GPU 109/85`` (mW,
  no unit; AGX Xavier omits ``@MHz`` on EMC/GR3D);
- JetPack 5: the same with ``mW`` units: ``VDD_IN 5000mW/4900mW``;
- JetPack 6: a ``MM-DD-YYYY HH:MM:SS`` prefix and ``GR3D_FREQ 84%@[713]`` (one clock per GPC).
"""

from __future__ import annotations

import re
import subprocess
import threading
import time
from typing import Any

from jetpredict.profiler import sysfs
from jetpredict.profiler.power.base import MODULE_DOMAIN, PowerMeter, PowerReadError
from jetpredict.profiler.power.rails import IGNORED_LABELS, plausible_module_power, total_name, total_rule
from jetpredict.profiler.power_defaults import DEFAULT_SAMPLER_HZ

#: ``tegrastats --interval``, ms: one reading per period of the default sampler (100 ms at 10 Hz).
DEFAULT_INTERVAL_MS = round(1000 / DEFAULT_SAMPLER_HZ)
#: Seconds tegrastats has after SIGTERM before SIGKILL: shorter than a privileged command's
#: (:data:`~profiler.powermode.privileged.STOP_GRACE_S`): it only reads sensors, and its close is on the
#: way out of every run, Ctrl-C included. Also how long :meth:`TegrastatsMeter.close` then waits for the
#: reader.
TEGRASTATS_STOP_GRACE_S = 2.0

_TIMESTAMP = re.compile(r"^\s*(\d{2}-\d{2}-\d{4} \d{2}:\d{2}:\d{2})\s+")
_RAM = re.compile(r"\bRAM (\d+)/(\d+)MB")
_SWAP = re.compile(r"\bSWAP (\d+)/(\d+)MB")
_CPU = re.compile(r"\bCPU \[([^\]]*)\]")
_EMC = re.compile(r"\bEMC_FREQ (\d+)%(?:@(\d+))?")
_GR3D = re.compile(r"\bGR3D_FREQ (\d+)%(?:@(\[[\d,\s]*\]|\d+))?")
_TEMP = re.compile(r"\b([A-Za-z][A-Za-z0-9_]*)@(-?\d+(?:\.\d+)?)C\b")
# A rail is NAME <int>[mW]/<int>[mW] followed by a space or the end; "RAM 1/2MB" does not qualify.
_RAIL = re.compile(r"(?<![\w@])([A-Za-z][A-Za-z0-9_]*) (\d+)(?:mW)?/(\d+)(?:mW)?(?=\s|$)")


def _mhz_list(text: str | None) -> list[float]:
    if not text:
        return []
    return [float(x) for x in re.findall(r"\d+", text)]


def parse_tegrastats_line(line: str) -> dict[str, Any]:
    """One tegrastats line as a dict; fields a line lacks are None (or empty).

    Keys: ``timestamp``, ``ram_used_mb``, ``ram_total_mb``, ``swap_used_mb``, ``cpu_load_pct`` and
    ``cpu_mhz`` (per core, None when off), ``emc_load_pct``, ``emc_mhz``, ``gpu_load_pct``, ``gpu_mhz``
    (max over GPCs), ``temps_c``, ``rails_mw`` (instant), ``rails_avg_mw``, ``rails_w`` (instant, W).
    Raises ``ValueError`` for a line that is not tegrastats output.
    """
    out: dict[str, Any] = {"timestamp": None, "ram_used_mb": None, "ram_total_mb": None,
                           "swap_used_mb": None, "cpu_load_pct": [], "cpu_mhz": [],
                           "emc_load_pct": None, "emc_mhz": None, "gpu_load_pct": None, "gpu_mhz": None,
                           "temps_c": {}, "rails_mw": {}, "rails_avg_mw": {}, "rails_w": {}}
    if m := _TIMESTAMP.match(line):
        out["timestamp"] = m.group(1)
    if m := _RAM.search(line):
        out["ram_used_mb"], out["ram_total_mb"] = float(m.group(1)), float(m.group(2))
    if m := _SWAP.search(line):
        out["swap_used_mb"] = float(m.group(1))
    if m := _CPU.search(line):
        for core in m.group(1).split(","):
            cm = re.fullmatch(r"\s*(\d+)%(?:@(\d+))?\s*", core)
            out["cpu_load_pct"].append(float(cm.group(1)) if cm else None)
            out["cpu_mhz"].append(float(cm.group(2)) if cm and cm.group(2) else None)
    if m := _EMC.search(line):
        out["emc_load_pct"] = float(m.group(1))
        out["emc_mhz"] = float(m.group(2)) if m.group(2) else None
    if m := _GR3D.search(line):
        out["gpu_load_pct"] = float(m.group(1))
        clocks = _mhz_list(m.group(2))
        out["gpu_mhz"] = max(clocks) if clocks else None
    out["temps_c"] = {name: float(v) for name, v in _TEMP.findall(line)}
    for name, now_mw, avg_mw in _RAIL.findall(line):
        if name in ("RAM", "SWAP", "IRAM"):
            continue
        out["rails_mw"][name] = float(now_mw)
        out["rails_avg_mw"][name] = float(avg_mw)
        out["rails_w"][name] = float(now_mw) / 1e3
    if out["ram_total_mb"] is None and not out["rails_mw"] and not out["cpu_load_pct"]:
        raise ValueError(f"not a tegrastats line: {line[:80]!r}")
    return out


class TegrastatsMeter(PowerMeter):
    """Module power from a running ``tegrastats --interval MS`` (found on PATH or under the fake root).

    A reader thread keeps the latest total and when its line arrived; :meth:`read_timed_power_w` returns
    both (:meth:`read_power_w` the total) and raises when no fresh line came within three intervals (a
    stopped tool must not repeat its last value forever). A total no module can draw
    (:func:`~jetpredict.profiler.power.rails.plausible_module_power`, which the INA3221 meter checks too: a torn
    or garbled line, or 0 mW from a rail the monitor does not see) is skipped like a stray line: the last
    reading stands until it is stale, and then reads fail naming it.
    """

    domain = MODULE_DOMAIN

    def __init__(self, interval_ms: int = DEFAULT_INTERVAL_MS, board: str | None = None, executable: str | None = None,
                 first_line_timeout_s: float = 5.0) -> None:
        exe = executable or sysfs.which("tegrastats")
        if exe is None:
            raise LookupError("tegrastats not found on PATH")
        self.interval_ms = int(interval_ms)
        self._board = board
        self._plausible = plausible_module_power(board)
        self._latest: tuple[float, float] | None = None  # (perf_counter s, total W)
        self._total: tuple[str, ...] = ()
        self._error: str | None = None
        self._skipped: str | None = None  # why the last line since the latest reading was skipped
        self._first = threading.Event()
        self._proc = subprocess.Popen([exe, "--interval", str(self.interval_ms)], stdout=subprocess.PIPE,
                                      stderr=subprocess.DEVNULL, text=True, bufsize=1)
        self._reader = threading.Thread(target=self._read_lines, name="jetpredict-tegrastats", daemon=True)
        self._reader.start()
        if not self._first.wait(first_line_timeout_s) or not self._total:
            reason = self._error or f"no output within {first_line_timeout_s:g} s"
            self.close()
            raise LookupError(f"tegrastats: {reason}")
        self.name = f"tegrastats:{total_name(self._total)}"

    @property
    def update_hz(self) -> float:
        """tegrastats prints one line every ``interval_ms`` ms: a new reading that often (Hz)."""
        return 1e3 / self.interval_ms

    def _read_lines(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            arrived = time.perf_counter()  # before parsing: the reading's time, not the parser's
            try:
                rails = parse_tegrastats_line(line)["rails_mw"]
                if not self._total:
                    labels = [r for r in rails if r.upper() not in IGNORED_LABELS]
                    total, found_as = total_rule(labels, self._board)
                    self._total = tuple(found_as[r] for r in total)
                total_w = sum(rails[r] for r in self._total) / 1e3
                # 0 W would make the window's energy 0 J, which no profile row may hold: unknown, not 0.
                if problem := self._plausible.problem(total_w):
                    raise ValueError(problem)
                self._latest, self._skipped = (arrived, total_w), None
                self._first.set()
            except (ValueError, LookupError, KeyError) as err:
                # One stray line (a warning, a blank) must not void the window: the last reading stands
                # until it is stale, and a tool that prints only such lines goes stale.
                self._error = self._skipped = f"{type(err).__name__}: {err}"
        self._first.set()

    @property
    def rails(self) -> tuple[str, ...]:
        return self._total

    def read_timed_power_w(self) -> tuple[float, float]:
        """The latest line's module power (W) and the time it arrived (perf_counter s): the tool prints the
        rails it has just read, so that is when the reading was taken, up to one interval before this call."""
        latest = self._latest
        stale_s = max(3 * self.interval_ms / 1e3, 0.5)
        if latest is None:
            raise PowerReadError(f"tegrastats: {self._error or 'no reading'}")
        if time.perf_counter() - latest[0] > stale_s:
            state = "exited" if self._proc.poll() is not None else "silent"
            skipped = f"; the lines since were skipped: {self._skipped}" if self._skipped else ""
            raise PowerReadError(f"tegrastats {state}: last usable line {time.perf_counter() - latest[0]:.2f} s "
                                 f"ago{skipped}")
        return latest

    def read_power_w(self) -> float:
        return self.read_timed_power_w()[1]

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=TEGRASTATS_STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        # The reader ends at EOF once the process is gone; close the pipe only after it has.
        if self._reader.is_alive() and self._reader is not threading.current_thread():
            self._reader.join(timeout=TEGRASTATS_STOP_GRACE_S)
        if self._proc.stdout and not self._reader.is_alive():
            self._proc.stdout.close()
