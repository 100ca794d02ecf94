"""The ``jetpredict`` command line. Verbs and flags are a contract (the README's command-line tour):
tests outside the repository call them.

Each package registers its own verbs (``register(subparsers)``); heavy imports (torch, Flask, pandas) happen
only inside the verb that needs them, so ``jetpredict devices`` starts fast and works without extras, and
``jetpredict restore`` (after a crash) and ``apply`` start without pandas.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import traceback
from collections.abc import Sequence
from typing import TYPE_CHECKING

from jetpredict import __version__
from jetpredict.models.catalogue import MODE_FIELDS, POWER_MODE_SPACES, Device, list_devices, load_device
from jetpredict.models.errors import InputError, say
from jetpredict.models.tables import FORMATS, TABLE_WIDTH, write_table
from jetpredict.predictor.limits import (
    DEFAULT_CONFIDENCE,
    DEFAULT_OBJECTIVE,
    DEFAULT_TARGET_WIDTH_REL,
    MAX_RIVAL_GAIN,
    OBJECTIVES,
)

if TYPE_CHECKING:
    import pandas as pd


def _mode_frame(device: Device, modes: str, with_device: bool = False) -> pd.DataFrame:
    """``device``'s presets as listed (``modes="presets"``) or its whole custom-mode space (``"all"``); a
    ``device`` column first when ``with_device``."""
    import pandas as pd

    if modes == "all":
        space = device.modes()
        df = pd.DataFrame(space.arrays().columns(), columns=list(MODE_FIELDS))
        df.insert(0, "mode", space.labels())
    else:
        df = pd.DataFrame([p.listing() for p in device.presets])
    if with_device:
        df.insert(0, "device", device.id)
    return df


def _devices(args: argparse.Namespace) -> int:
    import pandas as pd

    if args.device is None and args.modes is None:
        rows = [{
            "device": d.id, "name": d.name, "cpu": f"{d.specs.cpu_cores}x {d.specs.cpu_type}",
            "gpu": f"{d.specs.gpu_arch}, {d.specs.cuda_cores} CUDA cores", "memory":
            f"{d.specs.memory_gb:g} GB {d.specs.memory_type} {d.specs.peak_bandwidth_gbs:g} GB/s",
            "presets": len(d.presets), "power_modes": len(d.modes()),
        } for d in list_devices()]
        write_table(pd.DataFrame(rows), args.format,
                    table_columns=("device", "name", "presets", "power_modes", "memory", "cpu", "gpu"))
        return 0
    if args.device is None:  # --modes alone: every device's modes, each row naming its device
        devices = list_devices()
        df = pd.concat([_mode_frame(d, args.modes, with_device=True) for d in devices], ignore_index=True)
        if args.format == "table":
            print(f"{len(devices)} devices: {len(df)} {'custom power modes' if args.modes == 'all' else 'presets'}",
                  file=sys.stderr)
        write_table(df, args.format)
        return 0
    device = load_device(args.device)
    df = _mode_frame(device, args.modes or POWER_MODE_SPACES[0])
    if args.format == "table":
        print(f"{device.name} ({device.id}): {len(device.modes())} custom power modes, "
              f"{len(device.presets)} presets", file=sys.stderr)
        for fact, source in device.sources.items():  # where the catalogue's facts come from
            print(f"  {fact} from: {source}", file=sys.stderr)
    write_table(df, args.format)
    return 0


def _register_devices(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("devices", help="list Jetson types, their presets or their full power-mode space")
    p.add_argument("device", nargs="?", help="catalogue id, e.g. agx-xavier")
    p.add_argument("--modes", choices=POWER_MODE_SPACES, default=None,
                   help="with DEVICE: its presets (the default) or every custom mode; without DEVICE: those of "
                        "every device, a device column first (without --modes: the device table)")
    p.add_argument("--format", choices=FORMATS, default="table",
                   help=f"table: aligned text for a person, at most {TABLE_WIDTH} characters wide (columns past "
                   "that left out, which it says on standard error); csv or json: every column, for scripts "
                   "(default %(default)s)")
    p.set_defaults(handler=_devices)


def _at_steps(device: Device, candidates: pd.DataFrame) -> pd.DataFrame:
    """``--candidates`` with each custom mode's clocks (MHz) at the device's steps a switch runs them at (the
    twin's and ``apply``'s rule, :meth:`~models.catalogue.Device.runs_at`); a row records those, and the chooser
    must know it as its pick. Rows with knobs out of range or not numbers are left to the chooser's checks."""
    import numpy as np
    import pandas as pd

    from jetpredict.models.catalogue import PowerMode

    table = candidates.copy()  # keeps attrs: the file lines errors name
    if not set(MODE_FIELDS) <= set(table.columns):
        return table
    for name in MODE_FIELDS[1:]:  # a column of whole MHz (1200) takes a step's fraction (1190.4)
        if pd.api.types.is_integer_dtype(table[name]):
            table[name] = table[name].astype(float)
    # Only a row with a clock off the device's steps can move: the others are left without a look (a
    # --candidates list may hold the whole space).
    numbers = table[list(MODE_FIELDS)].apply(pd.to_numeric, errors="coerce")
    on_steps = np.logical_and.reduce([np.isin(numbers[name].to_numpy(float), steps) for name, steps in zip(
        MODE_FIELDS[1:], (device.cpu_steps_mhz, device.gpu_steps_mhz, device.emc_steps_mhz), strict=True)])
    for i in np.flatnonzero(~on_steps & numbers.notna().all(axis=1).to_numpy()):
        values = [float(v) for v in numbers.iloc[i]]
        if device.out_of_range(*(np.atleast_1d(v) for v in values)):
            continue
        label = table["mode"].iloc[i] if "mode" in table.columns else None
        mode = PowerMode(label if isinstance(label, str) else "", int(values[0]), *values[1:])
        runs = device.runs_at(mode)
        if type(runs) is PowerMode:  # a preset keeps its knobs: the chooser counts it profiled by its name
            for name, value in zip(MODE_FIELDS[1:], runs.knobs()[1:], strict=True):
                table.iloc[i, table.columns.get_loc(name)] = value
    return table


def _adaptive_chooser(device_id: str, start, **options):
    """``profile --adaptive``'s chooser: the predictor's (imported when the verb runs, not at start-up), over
    the candidates at the steps they run at (:func:`_at_steps`)."""
    from jetpredict.predictor.adaptive import make_chooser

    if options.get("candidates") is not None:
        options["candidates"] = _at_steps(load_device(device_id), options["candidates"])
    return make_chooser(device_id, start, **options)


def build_parser() -> argparse.ArgumentParser:
    from jetpredict.api import serve_cli
    from jetpredict.predictor import cli as predictor_cli
    from jetpredict.profiler import cli as profiler_cli
    from jetpredict.profiler import status as status_cli

    parser = argparse.ArgumentParser(
        prog="jetpredict",
        description="Predict DNN training epoch time and energy on every Jetson power mode.")
    parser.add_argument("--version", action="version", version=f"jetpredict {__version__}")
    sub = parser.add_subparsers(dest="verb", required=True)
    _register_devices(sub)
    profiler_cli.register(sub, adaptive=_adaptive_chooser, rules=profiler_cli.AdaptiveRules(
        tuple(OBJECTIVES), DEFAULT_OBJECTIVE, MAX_RIVAL_GAIN, DEFAULT_CONFIDENCE, DEFAULT_TARGET_WIDTH_REL))
    status_cli.register(sub)
    predictor_cli.register(sub)
    serve_cli.register(sub)
    return parser


#: Verbs whose answer (the data a script reads) goes to standard output, unless ``--out`` names a file.
ANSWER_VERBS = ("devices", "status", "plan", "predict", "recommend")


def _answers_on_stdout(args: argparse.Namespace) -> bool:
    """Whether the verb of ``args`` writes its answer to standard output (``apply --dry-run``'s steps are its
    answer; ``apply``'s report of the switch is not: the switch is)."""
    if args.verb == "apply":
        return bool(getattr(args, "dry_run", False))
    return args.verb in ANSWER_VERBS and getattr(args, "out", None) is None


def _stand_in_for_closed(name: str) -> bool:
    """Put ``os.devnull`` where the standard stream ``name`` (``stdout``, ``stderr``) was closed (``>&-``),
    its file descriptor included: else the next file opened takes that number and a child process's output
    or a stray write lands in it. Returns whether it was closed."""
    if getattr(sys, name) is not None:
        return False
    fd = 1 if name == "stdout" else 2
    null = os.open(os.devnull, os.O_WRONLY)
    if null != fd:
        os.dup2(null, fd)
        os.close(null)
    setattr(sys, name, open(fd, "w", closefd=False))  # noqa: SIM115 -- the stream lasts the process
    return True


#: Characters of the text around the one a UnicodeError names, each side, that its message quotes.
UNICODE_CONTEXT_CHARS = 20


def _unicode_words(exc: UnicodeError) -> str:
    """A UnicodeError as one line: what could not be encoded or decoded, where (a file name, a label, a row
    of the answer), and the usual cure."""
    if not isinstance(exc, (UnicodeEncodeError, UnicodeDecodeError)):
        return f"{exc}; a UTF-8 locale (LC_ALL=C.UTF-8) takes every name"
    text, start, end = exc.object, exc.start, exc.end
    near = text[max(0, start - UNICODE_CONTEXT_CHARS):end + UNICODE_CONTEXT_CHARS]
    verb = "encoded in" if isinstance(exc, UnicodeEncodeError) else "decoded as"
    return (f"{text[start:end]!r} in {near!r} cannot be {verb} this locale's encoding, {exc.encoding} "
            f"({exc.reason}); a UTF-8 locale (LC_ALL=C.UTF-8) takes every name")


def main(argv: Sequence[str] | None = None) -> int:
    _stand_in_for_closed("stderr")  # `2>&-`: messages and progress bars go nowhere, the work is done
    try:
        parser = build_parser()
    except InputError as exc:
        # The service's settings read the catalogue as the parser is built: a broken models/devices/*.toml
        # stops every verb, --help included; said in one line naming the file, field and rule.
        say(f"jetpredict: error: {exc.message}")
        return 2
    args = parser.parse_args(argv)  # with standard output closed, argparse's --help goes to stderr
    if _stand_in_for_closed("stdout") and _answers_on_stdout(args):
        # `>&-`: the answer would be lost while the exit status said it was written.
        where = "; --out FILE writes it to a file" if hasattr(args, "out") else ""
        say(f"jetpredict {args.verb}: failed: standard output is closed, nowhere to write the answer{where}")
        return 1
    try:
        return int(args.handler(args) or 0)
    except InputError as exc:
        # The one line names the innermost file; JETPREDICT_DEBUG=1 adds the chain (a user module's imports).
        if os.environ.get("JETPREDICT_DEBUG"):
            traceback.print_exception(exc, file=sys.stderr)
        say(f"jetpredict {args.verb}: error: {exc.message}")
        return 2
    except BrokenPipeError:  # e.g. `jetpredict devices ... | head`
        return 0
    except KeyboardInterrupt as exc:
        # Ctrl-C is the user's choice, not a failure to trace; any power mode is restored by now.
        if os.environ.get("JETPREDICT_DEBUG"):
            raise
        # A campaign says what it kept (the modes finished are in --out): KeyboardInterrupt's message.
        say(f"jetpredict {args.verb}: interrupted" + (f": {exc}" if str(exc) else ""))
        return 128 + signal.SIGINT
    except SystemExit as exc:
        # SIGTERM, SIGHUP or SIGQUIT stopped a run that switches power modes (SignalExit, imported only
        # here: the power-mode code loads with the verbs that use it): one line, as for Ctrl-C.
        from jetpredict.profiler.powermode.base import SignalExit

        if not isinstance(exc, SignalExit):
            raise
        say(f"jetpredict {args.verb}: {exc.describe()}")
        return exc.code
    except UnicodeError as exc:
        # A file name or label this locale cannot encode (LC_ALL=C makes names ASCII): a setting, not a bug.
        if os.environ.get("JETPREDICT_DEBUG"):
            raise
        say(f"jetpredict {args.verb}: error: {_unicode_words(exc)}")
        return 2
    except (OSError, RuntimeError) as exc:
        # Operational failures (a privileged command refused, a sensor gone, a port in use) are
        # reported in one line; JETPREDICT_DEBUG=1 shows the traceback.
        if os.environ.get("JETPREDICT_DEBUG"):
            raise
        say(f"jetpredict {args.verb}: failed: {exc}")
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
