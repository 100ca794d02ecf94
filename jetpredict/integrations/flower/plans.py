"""One node's plan for a round, made from one fleet plan, and its ``jetpredict.plan`` record.

A node with epoch scale ``s`` (its local epoch in epochs of the profiled workload) is planned under
deadline ``D / s`` and its figures are scaled by ``s``: exact, because epoch time and energy are
proportional to the work. Every figure comes from the fleet plan's client entry
(:class:`~jetpredict.predictor.fleet.ClientAssignment`); nothing is predicted again per mode.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from flwr.app import ConfigRecord, Message

from jetpredict.integrations.flower.planners import PROVENANCE_KEYS, FleetPlanner, PlannerError
from jetpredict.integrations.flower.wire import MODE_KEYS, PLAN_RECORD, as_float
from jetpredict.models.catalogue import PowerMode
from jetpredict.models.errors import InputError


@dataclass
class NodeInfo:
    """What a node told the device query: its Jetson type and epoch scale, or why it is unknown."""

    node_id: int
    device: str | None
    epoch_scale: float = 1.0
    reason: str | None = None


@dataclass
class ClientPlan:
    """One node's plan for a round. Times in s and energies in J cover the round's local training
    (``epochs`` x ``epoch_scale`` profiled epochs); ``idle_energy_j`` is the base power from finishing
    (point estimate) until the deadline. Power in W. ``confidence``: coverage of the intervals (the
    deadline holds for ``time_s_high``); ``confidence_note``: why the planner's real-data calibration does
    not back it here (None when it does). What the prediction of the planned mode rests on, as the
    planner's answer states it for this node (:data:`~.planners.PROVENANCE_KEYS`): ``workload_id``,
    ``reference_source`` and ``workload_source`` (``published`` / ``measured`` / ``simulated``: the least
    trusted data the plan used), ``profiled_modes`` (the fewest distinct modes among the rows that serve the
    plan's devices),
    ``model_version``; with ``cross_device``, whether it was predicted from another device's rows.
    ``None`` = the planner gave no such figure."""

    node_id: int
    device: str
    epoch_scale: float
    epochs: int
    deadline_s: float
    meets_deadline: bool
    reason: str | None = None
    mode: str | None = None
    cpu_cores: int | None = None
    cpu_mhz: float | None = None
    gpu_mhz: float | None = None
    emc_mhz: float | None = None
    time_s: float | None = None
    time_s_low: float | None = None
    time_s_high: float | None = None
    energy_j: float | None = None
    energy_j_low: float | None = None
    energy_j_high: float | None = None
    idle_energy_j: float | None = None
    avg_power_w: float | None = None
    avg_power_w_low: float | None = None
    avg_power_w_high: float | None = None
    cross_device: bool | None = None
    power_source: str | None = None
    confidence: float | None = None
    confidence_note: str | None = None
    workload_id: str | None = None
    reference_source: str | None = None
    workload_source: str | None = None
    profiled_modes: int | None = None
    model_version: str | None = None

    def provenance(self) -> dict[str, Any]:
        """What the plan's prediction rests on (:data:`~.planners.PROVENANCE_KEYS` and ``cross_device``)."""
        return {**{k: getattr(self, k) for k in PROVENANCE_KEYS}, "cross_device": self.cross_device}

    def power_mode(self) -> PowerMode | None:
        """The planned mode (None when the plan names none)."""
        if self.mode is None:
            return None
        return PowerMode(self.mode, int(self.cpu_cores), float(self.cpu_mhz), float(self.gpu_mhz),
                         float(self.emc_mhz))

    def to_config(self) -> ConfigRecord:
        """The ``jetpredict.plan`` record of a train message (unknown figures are left out)."""
        record: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None and f.name not in ("node_id", "reason"):
                record[f.name.replace("_", "-")] = value
        return ConfigRecord(record)

    @classmethod
    def from_config(cls, record: Mapping[str, Any], node_id: int = 0) -> ClientPlan:
        """Parse a ``jetpredict.plan`` record; InputError naming the key when it is malformed."""
        kwargs: dict[str, Any] = {"node_id": node_id}
        for f in fields(cls):
            key = f.name.replace("_", "-")
            if key in record:
                kwargs[f.name] = record[key]
        for name in ("device", "epoch_scale", "epochs", "deadline_s", "meets_deadline"):
            if name not in kwargs:
                raise InputError(f"{PLAN_RECORD} has no {name.replace('_', '-')!r}", f"{PLAN_RECORD}.{name}")
        if kwargs.get("mode") is not None:
            for name, key in MODE_KEYS:
                if kwargs.get(name) is None:
                    raise InputError(f"{PLAN_RECORD} names a mode but has no {key!r}", f"{PLAN_RECORD}.{key}")
        return cls(**kwargs)


def read_plan(message: Message) -> ClientPlan | None:
    """The plan the strategy put into a train message (None when it carries none)."""
    record = message.content.config_records.get(PLAN_RECORD)
    if record is None:
        return None
    return ClientPlan.from_config(record, node_id=message.metadata.dst_node_id)


#: ClientPlan field <- fleet-plan client field, scaled by the node's epoch scale (s and J of the work).
_SCALED = (("time_s", "round_time_s"), ("time_s_low", "round_time_s_low"), ("time_s_high", "round_time_s_high"),
           ("energy_j", "train_energy_j"), ("energy_j_low", "train_energy_j_low"),
           ("energy_j_high", "train_energy_j_high"),
           # Planned under D/s, idle is base x (D/s - epochs x T); times s it is base x (D - s x epochs x T),
           # the node's own idle time until the deadline.
           ("idle_energy_j", "idle_energy_j"))
#: ClientPlan fields taken as they are (W: power does not scale with the work).
_AS_IS = ("avg_power_w", "avg_power_w_low", "avg_power_w_high")


def plan_nodes(planner: FleetPlanner, nodes: Iterable[NodeInfo], deadline_s: float, epochs: int
               ) -> dict[int, ClientPlan]:
    """One :class:`ClientPlan` per node with a known device: one fleet plan per epoch scale ``s`` among the
    nodes, under deadline ``deadline_s / s`` (s) for ``epochs`` local epochs (see the module docstring).

    A plan the planner refuses for one epoch scale (a service's limit on ``deadline_s / s``, say) leaves
    those nodes unplanned with the planner's reason, and the others are planned; when it refuses every
    scale, its :class:`PlannerError` is raised (no plan at all: the caller skips the round). A failure
    that is not the request's own (:attr:`PlannerError.round_wide`: the service unreachable, overloaded,
    refusing the key, failing) is raised at once: asking the other scales would cost each its retries and
    timeouts (with 28 scales, about an hour at the client's defaults) to fail the same way."""
    by_scale: dict[float, list[NodeInfo]] = {}
    for node in nodes:
        if node.device is not None:
            by_scale.setdefault(float(node.epoch_scale), []).append(node)
    plans: dict[int, ClientPlan] = {}
    refused: list[PlannerError] = []
    for scale, group in by_scale.items():
        try:
            answer = planner.plan([{"id": str(n.node_id), "device": str(n.device)} for n in group],
                                  deadline_s / scale, epochs)
        except PlannerError as err:
            if err.round_wide:
                raise
            refused.append(err)
            for node in group:
                plans[node.node_id] = ClientPlan(
                    node_id=node.node_id, device=str(node.device), epoch_scale=scale, epochs=epochs,
                    deadline_s=deadline_s, meets_deadline=False,
                    reason=f"not planned: the planner refused epoch scale {scale:g} (deadline {deadline_s:g} s / "
                           f"{scale:g} = {deadline_s / scale:.4g} s of profiled epochs): {err}")
            continue
        by_id = {str(c["id"]): c for c in answer["clients"]}
        confidence = as_float(answer.get("confidence"))
        for node in group:
            client = by_id[str(node.node_id)]
            plan = _client_plan(node, client, scale, deadline_s, epochs, confidence, answer.get("confidence_note"))
            _add_provenance(plan, client, answer)
            plans[node.node_id] = plan
    if refused and len(refused) == len(by_scale):
        raise refused[0]
    return plans


def _add_provenance(plan: ClientPlan, client: Mapping[str, Any], answer: Mapping[str, Any]) -> None:
    """The client entry's provenance (the plan that chose its mode), else the answer's top-level one; none
    for a node no model planned (its entry has a reason and no mode)."""
    if client.get("mode") is None and not any(client.get(k) is not None for k in PROVENANCE_KEYS):
        return
    for key in PROVENANCE_KEYS:
        value = client.get(key, answer.get(key))  # a client entry's None is its plan's word: no fallback
        setattr(plan, key, None if value is None else int(value) if key == "profiled_modes" else str(value))


def _client_plan(node: NodeInfo, c: Mapping[str, Any], scale: float, deadline_s: float, epochs: int,
                 confidence: float | None, confidence_note: str | None = None) -> ClientPlan:
    plan = ClientPlan(node_id=node.node_id, device=str(node.device), epoch_scale=scale, epochs=epochs,
                      deadline_s=deadline_s, meets_deadline=bool(c.get("meets_deadline")), reason=c.get("reason"),
                      confidence=confidence, confidence_note=confidence_note)
    if c.get("mode") is None:
        return plan
    plan.mode = str(c["mode"])
    plan.cpu_cores = int(c["cpu_cores"])
    plan.cpu_mhz, plan.gpu_mhz, plan.emc_mhz = (float(c[k]) for k in ("cpu_mhz", "gpu_mhz", "emc_mhz"))
    for name, key in _SCALED:
        value = as_float(c.get(key))
        setattr(plan, name, None if value is None else value * scale)
    for name in _AS_IS:
        setattr(plan, name, as_float(c.get(name)))
    plan.cross_device = None if c.get("cross_device") is None else bool(c["cross_device"])
    plan.power_source = None if c.get("power_source") is None else str(c["power_source"])
    if not plan.meets_deadline and plan.time_s_high is not None:
        # The planner's own reason quotes what it was asked: deadline D/s for profiled epochs. Say it in the
        # user's deadline and this node's time (the mode a plan that misses names is the fastest it found).
        plan.reason = (f"cannot meet the {deadline_s:g} s deadline: the fastest planned mode, {plan.mode}, "
                       f"needs up to {plan.time_s_high:.4g} s for {epochs} local epoch(s) on this node")
    return plan
