"""Per-board INA3221 rail maps and the rule for "module total" on each board.

Transcribed from the Jetson rail layouts (NVIDIA L4T developer guides and device trees, as collected in
energymon's JetsonPowerRails notes and per-board tegrastats rail notes):
a board either has one rail that feeds the whole module (``VDD_IN`` or ``POM_5V_IN``), or, like AGX
Xavier and AGX Orin, no such rail, so the total is the sum of the rails fed by the module supplies.
Sub-rails (``VDD_CPU_GPU_CV`` under ``VDD_IN``, ``VDDQ_VDD2_1V8AO`` under ``VIN_SYS_5V0``) are never added.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from jetpredict.models.catalogue import device_ids, list_devices, load_device
from jetpredict.profiler.power.base import PlausibleRange

#: Labels that are not rails: unconnected channels and the hwmon "sum of shunt voltages" channel.
IGNORED_LABELS = frozenset({"NC", "SUM OF SHUNT VOLTAGES"})


@dataclass(frozen=True)
class BoardRails:
    """One board's INA3221 rails (as the kernel labels them), and which of them make the module total.

    ``aliases`` maps other spellings seen in docs or newer kernels (``VDD_GPU``) to the rail name used
    here (``GPU``).
    """

    board: str
    rails: tuple[str, ...]
    total: tuple[str, ...]
    aliases: tuple[tuple[str, str], ...] = ()

    def canonical(self, label: str) -> str:
        label = label.strip()
        return dict(self.aliases).get(label.upper(), label)


BOARDS: dict[str, BoardRails] = {b.board: b for b in (
    # Nano (porg), 6-0040: POM_5V_IN is the 5 V module input; GPU and CPU rails hang below it.
    BoardRails("nano", ("POM_5V_IN", "POM_5V_GPU", "POM_5V_CPU"), ("POM_5V_IN",),
               aliases=(("VDD_IN", "POM_5V_IN"), ("VDD_GPU", "POM_5V_GPU"), ("VDD_CPU", "POM_5V_CPU"))),
    # Xavier NX (jakku), 7-0040.
    BoardRails("xavier-nx", ("VDD_IN", "VDD_CPU_GPU_CV", "VDD_SOC"), ("VDD_IN",),
               aliases=(("5V_IN", "VDD_IN"), ("VDD_CPU_GPU", "VDD_CPU_GPU_CV"))),
    # AGX Xavier (galen), 1-0040 + 1-0041: no module-input rail; the six channels add up to the module.
    BoardRails("agx-xavier", ("GPU", "CPU", "SOC", "CV", "VDDRQ", "SYS5V"),
               ("GPU", "CPU", "SOC", "CV", "VDDRQ", "SYS5V"),
               aliases=(("VDD_GPU", "GPU"), ("VDD_CPU", "CPU"), ("VDD_SOC", "SOC"), ("VDD_CV", "CV"),
                        ("VDD_DDRQ", "VDDRQ"), ("DDR", "VDDRQ"), ("VDD_SYS5V", "SYS5V"))),
    # AGX Orin, 1-0040 + 1-0041: no module-input rail; VDDQ_VDD2_1V8AO is fed by VIN_SYS_5V0.
    BoardRails("orin-agx", ("VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0", "VDDQ_VDD2_1V8AO"),
               ("VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0")),
    # Orin NX and Orin Nano share the P3767 carrier layout, 1-0040.
    BoardRails("orin-nx", ("VDD_IN", "VDD_CPU_GPU_CV", "VDD_SOC"), ("VDD_IN",)),
    BoardRails("orin-nano", ("VDD_IN", "VDD_CPU_GPU_CV", "VDD_SOC"), ("VDD_IN",)),
    # TX2 (quill), module rails on 0x40/0x41; VDD_MUX on 0x42 feeds the carrier, in parallel.
    # L4T 28 printed the older names (VDD_CPU, VDD_GPU, ...), kept as aliases.
    BoardRails("tx2", ("VDD_SYS_GPU", "VDD_SYS_SOC", "VDD_4V0_WIFI", "VDD_IN", "VDD_SYS_CPU",
                       "VDD_SYS_DDR"), ("VDD_IN",),
               aliases=(("VDD_GPU", "VDD_SYS_GPU"), ("VDD_SOC", "VDD_SYS_SOC"), ("VDD_WIFI", "VDD_4V0_WIFI"),
                        ("VDD_CPU", "VDD_SYS_CPU"), ("VDD_DDR", "VDD_SYS_DDR"))),
)}


def _normalise(labels: Iterable[str]) -> list[str]:
    return [lbl.strip() for lbl in labels if lbl.strip() and lbl.strip().upper() not in IGNORED_LABELS]


def match_board(labels: Iterable[str]) -> BoardRails | None:
    """The board whose total rails are all among ``labels`` (best rail overlap wins), else None."""
    found = _normalise(labels)
    best, best_score = None, 0
    for board in BOARDS.values():
        names = {board.canonical(x) for x in found}
        if not set(board.total) <= names:
            continue
        # Labels spelled exactly as this board's kernel spells them count double over aliases.
        score = len(names & set(board.rails)) + len(set(found) & set(board.rails))
        if score > best_score:
            best, best_score = board, score
    return best


def total_rule(labels: Iterable[str], board: str | None = None) -> tuple[tuple[str, ...], dict[str, str]]:
    """Which of ``labels`` to add up for the module total, and the label each total rail was found as.

    Returns ``(total_rails, {canonical: label})``. With ``board`` (a catalogue id) that board's rule is
    used; otherwise the board is recognised from the labels, and failing that any ``VDD_IN`` /
    ``POM_5V_IN`` rail is taken as the total. Raises ``LookupError`` naming what was missing.
    """
    found = _normalise(labels)
    # An id without a rail map (e.g. "host") falls back to recognising the labels.
    spec = (BOARDS.get(board) if board else None) or match_board(found)
    if spec is not None:
        by_canonical = {spec.canonical(x): x for x in found}
        missing = [r for r in spec.total if r not in by_canonical]
        if missing:
            raise LookupError(f"{spec.board}: total rails {', '.join(missing)} not found among "
                              f"{', '.join(found) or 'no rails'}")
        return spec.total, {r: by_canonical[r] for r in spec.total}
    for generic in ("VDD_IN", "POM_5V_IN"):
        for label in found:
            if label.upper() == generic:
                return (generic,), {generic: label}
    raise LookupError(f"no module-total rule for rails {', '.join(found) or '(none)'}: "
                      "expected VDD_IN, POM_5V_IN or a known board's rail set")


def total_name(total: tuple[str, ...]) -> str:
    """``VDD_IN`` for one rail, ``sum(GPU,CPU,...)`` for several."""
    return total[0] if len(total) == 1 else f"sum({','.join(total)})"


def plausible_module_power(board: str | None) -> PlausibleRange:
    """The module power (W) a reading of ``board`` (a catalogue id) can be: its catalogue range, or the widest
    over every module when the board is not known (``None``, ``host``, a board without a catalogue entry).
    Every Jetson module meter checks its total against it: a torn or garbled value, or 0 from a rail the
    monitor does not see, is a failed read, never energy."""
    if board in device_ids():
        lo_w, hi_w = load_device(board).power_range_w
        return PlausibleRange(lo_w, hi_w, f"{board}'s catalogue range")
    ranges = [d.power_range_w for d in list_devices()]
    return PlausibleRange(min(lo for lo, _ in ranges), max(hi for _, hi in ranges), "the widest over all modules")
