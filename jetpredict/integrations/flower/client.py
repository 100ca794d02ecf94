"""Client side: the answer to the device query, the planned round, and the mod that brings both to an app.

    from jetpredict.integrations.flower import jetpredict_mod

    app = ClientApp(mods=[jetpredict_mod()])        # the train function stays as it is

:class:`PlannedRound` runs a block at the planned power mode (through the profiler's controllers, the
previous mode restored on every exit path: exception, SIGINT, SIGTERM) and measures it in one
:func:`~jetpredict.profiler.metering.metered` window: time (s), module energy (J) and mean power (W), or
energy unknown with the reason. With a :class:`~.twin.TwinWorkload` it touches no hardware: time and
energy are the digital twin's for the planned device and mode (``source = "simulated"``).
:class:`JetpredictMod` wraps the app's train function in a PlannedRound and attaches the figures to its
reply, and answers the strategy's device query.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

from flwr.app import ConfigRecord, Context, Message, MetricRecord, RecordDict

from jetpredict.integrations.flower.plans import ClientPlan, read_plan
from jetpredict.integrations.flower.twin import (
    TwinWorkload,
    preset_mode,
    twin_mode,
    twin_round,
)
from jetpredict.integrations.flower.wire import (
    DEVICE_KEY,
    ENERGY_METRIC,
    EPOCH_SCALE_KEY,
    NODE_RECORD,
    POWER_METRIC,
    QUERY_ACTION,
    QUERY_RECORD,
    QUERY_TYPE,
    REPORT_RECORD,
    SIMULATED_METRIC,
    TIME_METRIC,
)
from jetpredict.models.catalogue import PowerMode
from jetpredict.models.errors import InputError
from jetpredict.models.profile_rows import TWIN_METER_PREFIX
from jetpredict.profiler.builtin_workloads import BUILTIN_WORKLOADS
from jetpredict.profiler.metering import DEFAULT_HZ, MeteredWindow, cuda_sync, metered

log = logging.getLogger(__name__)

NodeValue = Any  # a value, or a callable taking the Flower Context and returning it
#: A twin for every round, or a callable ``(message, context) -> TwinWorkload | None`` (None: measure).
TwinSpec = TwinWorkload | Callable[[Message, Context], TwinWorkload | None] | None


def _resolve(value: NodeValue, context: Context | None, key: str) -> Any:
    if callable(value):
        return value(context)
    if value is not None:
        return value
    if context is not None:
        return context.node_config.get(key)
    return None


def scale_conflict(epoch_scale: Any, twin: TwinWorkload, advice: str) -> InputError | None:
    """The error of a node whose ``epoch_scale`` (profiled epochs per local epoch: the work its plan is for)
    is not ``twin``'s (the work the twin costs), ``advice`` saying what to do; None when they agree."""
    if not isinstance(epoch_scale, int | float):
        return None  # not a number: the strategy refuses it at the device query, naming the key
    # The plan carries the node's answer as sent; isclose only spares a scale computed twice a last bit apart.
    if math.isclose(float(epoch_scale), twin.epoch_scale, rel_tol=1e-9):
        return None
    return InputError(f"epoch_scale={epoch_scale!r} contradicts the twin's epoch_scale={twin.epoch_scale!r}: "
                      f"{advice}", "epoch_scale")


def work_conflict(plan: ClientPlan, twin: TwinWorkload) -> InputError | None:
    """The error of a twin that costs other work than ``plan`` is for: other local epochs (``twin.epochs``
    given), or another built-in workload than the one the plan rests on (a stored workload id names no twin
    workload: not compared); None when they agree. The plan carries no batch size: ``twin.batch_size`` is not
    compared."""
    advice = "the twin's misses would count as real deadline misses"
    if twin.epochs is not None and twin.epochs != plan.epochs:
        return InputError(f"twin epochs={twin.epochs} is not the plan's {plan.epochs} local epochs: {advice}; "
                          "leave the twin's epochs unset (the plan's are used) or set local_epochs alike", "epochs")
    planned = plan.workload_id
    if planned in BUILTIN_WORKLOADS and planned != twin.workload.strip():
        return InputError(f"twin workload={twin.workload!r} is not the plan's workload {planned!r}: {advice}; "
                          "give the twin the workload the planner's model was fitted on", "workload")
    return None


def is_train(message: Message) -> bool:
    """True for a ``train`` message (any action)."""
    return message.metadata.message_type.split(".")[0] == "train"


class PlannedRound:
    """Context manager: run the block at its planned power mode and measure it (see the module docstring).

    On a Jetson (no ``twin``): enters the power-mode controller (``controller``, default
    ``detect_controller("jetson", device)``), applies the planned mode, measures the block with the power
    meter (``meter``, default ``detect_power_meter(device)``, sampled at ``sampler_hz`` Hz; ``sync`` runs
    before each clock read, default :func:`~jetpredict.profiler.metering.cuda_sync`) and restores the
    previous mode on every exit path (handlers for SIGINT/SIGTERM when entered from the main thread; see
    :class:`~jetpredict.profiler.powermode.PowerModeController`). A message without a plan (a plain Flower
    strategy's) runs at ``default_mode``, applied and restored the same way: a preset name of the device,
    or :data:`FASTEST_PRESET` for its fastest preset; with ``default_mode=None`` (the default) it trains at
    the mode in force and the report's ``mode`` is empty. Energy is None with ``energy-null-reason`` when
    there is no meter or no usable samples, never 0. With ``twin``: nothing is switched or measured; :attr:`report` holds the twin's time and
    energy for the planned device and mode (``source = "simulated"``).

    ``device``: catalogue id, a callable of the Context, or None for node config ``jetpredict-device``
    (the plan's device wins when there is a plan). ``default_mode`` is not used with ``twin``: the twin's
    own ``default_mode`` costs a plan-less round.
    """

    def __init__(self, message: Message, context: Context | None = None, *, device: NodeValue = None,
                 controller: Any = None, meter: Any = None, twin: TwinWorkload | None = None,
                 sampler_hz: float = DEFAULT_HZ, sync: Callable[[], None] | None = cuda_sync,
                 default_mode: str | None = None) -> None:
        self.plan = read_plan(message)
        node_device = _resolve(device, context, DEVICE_KEY)
        self.device: str | None = self.plan.device if self.plan is not None else (
            str(node_device) if node_device else None)
        self.twin = twin
        self.default_mode = default_mode
        self.controller = controller
        self.meter = meter
        self.sampler_hz = sampler_hz
        self.sync = sync
        self.report: dict[str, Any] = {}
        #: The measurement window of the block (its figures once the block has ended).
        self.window: MeteredWindow | None = None
        self._entered_controller = False
        self._own_meter = False  # close only a meter this round opened (a caller's may be reused)

    def _mode(self) -> PowerMode | None:
        if self.plan is not None:
            return self.plan.power_mode()
        if self.twin is not None:
            return twin_mode(self.device, self.twin) if self.device is not None else None
        if self.default_mode is not None and self.device is not None:
            return preset_mode(self.device, self.default_mode)
        return None

    def __enter__(self) -> PlannedRound:
        if self.plan is None and self.twin is None and self.default_mode is not None and self.device is None:
            # Training at the mode in force instead would report a baseline that was never run.
            raise InputError(f"default_mode={self.default_mode!r} needs the device: no plan and no "
                             f"{DEVICE_KEY}", DEVICE_KEY)
        mode = self._mode()
        if self.plan is not None and self.plan.mode is not None:
            log.info("jetpredict: planned mode %s on %s; its prediction rests on %s", self.plan.mode,
                     self.plan.device, ", ".join(f"{k}={v}" for k, v in self.plan.provenance().items()))
        self.report = {"device": self.device or "", "mode": mode.mode if mode else "", "mode-applied": False}
        if self.twin is not None:
            if self.device is None:
                raise InputError(f"the twin needs the device: no plan and no {DEVICE_KEY}", DEVICE_KEY)
            # The plan is for its epoch scale's work; a twin costing another would report other work than
            # was planned (and, costing more, miss the deadline every round).
            if self.plan is not None and (conflict := scale_conflict(
                    self.plan.epoch_scale, self.twin, "the plan is for the node's answer to the device query; "
                    "give the twin the node's epoch scale (jetpredict_mod: twin= and epoch_scale= alike)")):
                raise conflict
            if self.plan is not None and (conflict := work_conflict(self.plan, self.twin)):
                raise conflict
            self.window = metered(None, sync=self.sync).__enter__()  # wall time only
            return self
        try:
            if mode is not None:
                if self.controller is None:
                    self.controller = _jetson_controller(str(self.device), mode)
                self.controller.__enter__()
                self._entered_controller = True
                self.controller.apply(mode)
                self.report["mode-applied"] = True
            if self.meter is None:
                from jetpredict.profiler.power import detect_power_meter

                self.meter = detect_power_meter(self.device)
                self._own_meter = True
            self.window = metered(self.meter, hz=self.sampler_hz, sync=self.sync).__enter__()
        except BaseException:
            self._release()
            raise
        return self

    def _release(self) -> None:
        """Close a meter this round opened and restore the previous mode (each at most once)."""
        try:
            if self._own_meter:
                self._own_meter = False
                self.meter.close()
        finally:
            if self._entered_controller:
                self._entered_controller = False
                self.controller.__exit__(None, None, None)

    def __exit__(self, *exc: object) -> None:
        try:
            self.window.__exit__(None, None, None)
            self.report["wall-time-s"] = self.window.time_s
            if self.twin is not None:
                self._simulated()
            else:
                self._measured()
        finally:
            self._release()  # restore the previous mode even when measuring failed

    def _simulated(self) -> None:
        mode = self._mode()
        epochs = self.twin.epochs or (self.plan.epochs if self.plan is not None else 1)
        figures = twin_round(str(self.device), mode, self.twin, epochs)
        self.report.update({"source": "simulated", "meter": f"{TWIN_METER_PREFIX}{self.device}", "time-s": figures["time_s"],
                            "energy-j": figures["energy_j"], "avg-power-w": figures["avg_power_w"],
                            "base-power-w": figures["base_power_w"], "mode-applied": True,
                            "twin-workload": self.twin.workload, "epochs": epochs,
                            "epoch-scale": float(self.twin.epoch_scale)})

    def _measured(self) -> None:
        w = self.window
        self.report.update({"source": "measured", "time-s": w.time_s, "meter": w.meter})
        if w.energy_j is None:
            self.report["energy-null-reason"] = w.null_reason
        else:
            self.report.update({"energy-j": w.energy_j, "avg-power-w": w.avg_power_w})

    def metrics(self) -> dict[str, float]:
        """The ``jetpredict-*`` metrics of the reply (energy and power absent when unknown)."""
        out = {TIME_METRIC: float(self.report["time-s"]),
               SIMULATED_METRIC: 1.0 if self.report.get("source") == "simulated" else 0.0}
        if self.report.get("energy-j") is not None:
            out[ENERGY_METRIC] = float(self.report["energy-j"])
        if self.report.get("avg-power-w") is not None:
            out[POWER_METRIC] = float(self.report["avg-power-w"])
        return out

    def attach(self, content: RecordDict) -> RecordDict:
        """Add :meth:`metrics` to the reply's MetricRecord (creating ``"metrics"`` when it has none) and the
        full report as a ``jetpredict.report`` ConfigRecord; returns ``content``."""
        if "time-s" not in self.report:
            raise RuntimeError("PlannedRound.attach() must be called after the with-block has ended")
        records = content.metric_records
        if records:
            target = next(iter(records.values()))
        else:
            target = MetricRecord()
            content["metrics"] = target
        for key, value in self.metrics().items():
            target[key] = value
        content[REPORT_RECORD] = ConfigRecord({k: v for k, v in self.report.items() if v is not None})
        return content


def _jetson_controller(device: str, mode: PowerMode) -> Any:
    """The power-mode controller of this Jetson; off one, the error says the Flower way (the mod's ``twin=``)
    rather than the CLI's, the controller's own reason kept."""
    from jetpredict.profiler.powermode import PrivilegedCommandError, detect_controller

    try:
        return detect_controller("jetson", device)
    except PrivilegedCommandError as ex:
        raise PrivilegedCommandError(
            f"cannot apply power mode {mode.mode} on {device}: this node has no Jetson power-mode control. A "
            "Flower node off a Jetson costs its rounds on the digital twin: jetpredict_mod(twin=TwinWorkload("
            "WORKLOAD, epoch_scale=S)) (or PlannedRound(..., twin=...)); else run the node on a Jetson. "
            f"Cause: {ex}", ex.argv, ex.returncode, ex.stderr) from ex


class JetpredictMod:
    """A Flower mod (``ClientApp(mods=[jetpredict_mod(...)])``) that gives an app jetpredict unchanged.

    - The device query (``query.jetpredict``, or a ``train`` message holding only a ``jetpredict.query``
      record) is answered here from ``device`` and ``epoch_scale`` without calling the app. Flower routes
      to mods only messages of registered types, so the strategy asks an app without a ``jetpredict``
      query function once more by a train message, which this mod answers (as Flower's SecAgg+ mod
      answers its own stages); :meth:`register_query` saves that second exchange.
    - A train message runs the app's function inside a :class:`PlannedRound` (the plan's mode applied
      and restored, one measurement window, or the twin's figures) and the figures are attached to the
      reply's metrics and ``jetpredict.report``; an error reply is passed on as it is.
    - Anything else passes through.

    ``device`` / ``epoch_scale``: a value, or a callable ``(context) -> value``; by default the node config
    keys ``jetpredict-device`` and ``jetpredict-epoch-scale`` (1.0 when absent), but a fixed
    :class:`~.twin.TwinWorkload` answers its own ``epoch_scale`` (the work it reports; a different constant
    ``epoch_scale`` is refused). In simulation, where every node shares one node config, pass callables of
    ``context.node_config["partition-id"]``. ``twin``: a :class:`~.twin.TwinWorkload`, or a callable
    ``(message, context)`` giving one (or None to measure).
    ``controller``, ``meter``, ``sampler_hz``, ``sync``, ``default_mode`` (the mode of a train message
    without a plan, e.g. :data:`FASTEST_PRESET`; None: the mode in force): as for :class:`PlannedRound`.
    """

    def __init__(self, device: NodeValue = None, epoch_scale: NodeValue = None, *, twin: TwinSpec = None,
                 controller: Any = None, meter: Any = None, sampler_hz: float = DEFAULT_HZ,
                 sync: Callable[[], None] | None = cuda_sync, default_mode: str | None = None) -> None:
        if isinstance(twin, TwinWorkload) and (
                conflict := scale_conflict(epoch_scale, twin, "give it once, on the TwinWorkload")):
            # The strategy would plan epoch_scale's work while the twin reports twin.epoch_scale's.
            raise conflict
        self.device = device
        self.epoch_scale = epoch_scale
        self.twin = twin
        self.round_options = {"controller": controller, "meter": meter, "sampler_hz": sampler_hz, "sync": sync,
                              "default_mode": default_mode}

    def __call__(self, message: Message, context: Context,
                 call_next: Callable[[Message, Context], Message]) -> Message:
        kind = message.metadata.message_type
        if kind == QUERY_TYPE or (is_train(message) and QUERY_RECORD in message.content.config_records):
            return self.answer_query(message, context)
        if not is_train(message):
            return call_next(message, context)
        twin = self.twin if self.twin is None or isinstance(self.twin, TwinWorkload) else self.twin(message, context)
        if twin is not None and self.epoch_scale is not None and read_plan(message) is None:
            # No plan to hold the twin to (PlannedRound checks a plan's scale): hold it to the scale given here.
            conflict = scale_conflict(_resolve(self.epoch_scale, context, EPOCH_SCALE_KEY), twin,
                                      "pass twin= and epoch_scale= alike")
            if conflict is not None:
                raise conflict
        with PlannedRound(message, context, device=self.device, twin=twin, **self.round_options) as planned:
            reply = call_next(message, context)
        if not reply.has_error():
            planned.attach(reply.content)
        return reply

    def answer_query(self, message: Message, context: Context) -> Message:
        """The node's answer to the device query: its device and epoch scale (``jetpredict.node``)."""
        dev = _resolve(self.device, context, DEVICE_KEY)
        record: dict[str, Any] = {"device": str(dev) if dev else ""}
        if not dev:
            record["reason"] = f"node config has no {DEVICE_KEY}"
        scale = self.epoch_scale
        if scale is None and isinstance(self.twin, TwinWorkload):
            scale = self.twin.epoch_scale  # the work the twin reports: the plan must cost the same
        scale = _resolve(scale, context, EPOCH_SCALE_KEY)
        # Sent as given; the strategy checks it and names the key when it is not a positive number.
        record["epoch-scale"] = 1.0 if scale is None else scale if isinstance(scale, int | float) else str(scale)
        return Message(RecordDict({NODE_RECORD: ConfigRecord(record)}), reply_to=message)

    def register_query(self, app: Any) -> None:
        """Register on ``app`` (a ``flwr.clientapp.ClientApp``) the ``query.jetpredict`` function, answered
        from this mod's ``device`` and ``epoch_scale``."""
        app.query(QUERY_ACTION)(self.answer_query)


def jetpredict_mod(device: NodeValue = None, epoch_scale: NodeValue = None, *, twin: TwinSpec = None,
                   controller: Any = None, meter: Any = None, sampler_hz: float = DEFAULT_HZ,
                   sync: Callable[[], None] | None = cuda_sync, default_mode: str | None = None) -> JetpredictMod:
    """The jetpredict mod of a ClientApp: ``ClientApp(mods=[jetpredict_mod(...)])``; see :class:`JetpredictMod`."""
    return JetpredictMod(device, epoch_scale, twin=twin, controller=controller, meter=meter,
                         sampler_hz=sampler_hz, sync=sync, default_mode=default_mode)


def add_device_query(app: Any, device: NodeValue = None, epoch_scale: NodeValue = None) -> None:
    """Register on ``app`` (a ``flwr.clientapp.ClientApp``) the answer to the strategy's device query.

    ``device`` / ``epoch_scale``: as for :class:`JetpredictMod` (by default the node config keys
    ``jetpredict-device`` and ``jetpredict-epoch-scale``, 1.0 when absent).
    """
    JetpredictMod(device, epoch_scale).register_query(app)
