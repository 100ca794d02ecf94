"""One node's plan for a round, made from one fleet plan, and its ``jetpredict.plan`` record.

A node with epoch scale ``s`` (its local epoch in epochs of the profiled workload) is planned under
deadline ``D / q``, ``q`` being ``s`` rounded up to two significant digits (:func:`planning_scale`: so close
scales share one plan, and the plan's mode meets the node's own deadline ``D / s``), and its time and
training energy are the entry's scaled by ``s``: exact for that mode, because epoch time and energy are
proportional to the work. A node whose plan misses ``D / q`` while its fastest mode meets ``D / s`` is
planned again, at a scale between its own and ``q`` (:func:`plan_nodes`). Every figure comes from a fleet
plan's client entry (:class:`~jetpredict.predictor.fleet.ClientAssignment`); nothing is predicted again
per mode.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple

from flwr.app import ConfigRecord, Message

from jetpredict.integrations.flower.planners import PROVENANCE_KEYS, FleetPlanner, PlannerError
from jetpredict.integrations.flower.wire import MODE_KEYS, PLAN_RECORD, as_float
from jetpredict.models.catalogue import PowerMode
from jetpredict.models.errors import InputError
from jetpredict.predictor.limits import DEADLINE_MISS_PREFIX

log = logging.getLogger(__name__)


@dataclass
class NodeInfo:
    """What a node told the device query: its Jetson type and epoch scale, or why it is unknown."""

    node_id: int
    device: str | None
    epoch_scale: float = 1.0
    reason: str | None = None


@dataclass(kw_only=True)
class PlanProvenance:
    """What the prediction of a node's planned mode rests on, as the planner's answer states it for the node:
    ``cross_device`` (predicted from another device's rows) and :data:`~.planners.PROVENANCE_KEYS` (the
    workload id and :data:`~jetpredict.predictor.limits.PROVENANCE_FIELDS`, where each is described); None =
    not stated. The one list of these fields of :class:`ClientPlan` and :class:`~.strategy.ClientRecord`
    (keyword-only, so their own fields without defaults may follow)."""

    cross_device: bool | None = None
    workload_id: str | None = None
    reference_source: str | None = None
    workload_source: str | None = None
    split_source: str | None = None
    profiled_modes: int | None = None
    model_version: str | None = None

    def provenance(self) -> dict[str, Any]:
        """What the plan's prediction rests on (:data:`~.planners.PROVENANCE_KEYS` and ``cross_device``)."""
        return {**{k: getattr(self, k) for k in PROVENANCE_KEYS}, "cross_device": self.cross_device}


#: ClientPlan's fields that are the server's bookkeeping: never sent to a node, never a node's to set.
SERVER_ONLY_FIELDS = ("planned_round", "kept")


@dataclass
class ClientPlan(PlanProvenance):
    """One node's plan for a round. Times in s and energies in J cover the round's local training
    (``epochs`` x ``epoch_scale`` profiled epochs); ``idle_energy_j`` is the base power from finishing
    (point estimate) until the deadline. Power in W. ``confidence``: coverage of the intervals (the
    deadline holds for ``time_s_high``); ``confidence_note``: why the planner's real-data calibration does
    not back it here (None when it does). What the prediction of the planned mode rests on: the fields of
    :class:`PlanProvenance`. ``None`` = the planner gave no such figure."""

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
    power_source: str | None = None
    confidence: float | None = None
    confidence_note: str | None = None
    #: The round this plan was made in (None: not told, :func:`plan_nodes` called without ``server_round``),
    #: and whether it is kept from then because the planner could not be asked this round (not sent to nodes).
    planned_round: int | None = field(default=None, compare=False)
    kept: bool = field(default=False, compare=False)

    def kept_reason(self) -> str | None:
        """Why a kept plan is used (None for one planned or confirmed this round)."""
        if not self.kept:
            return None
        return f"kept from {_round_name(self.planned_round)}: planner unreachable"

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
            if value is not None and f.name not in ("node_id", "reason", *SERVER_ONLY_FIELDS):
                record[f.name.replace("_", "-")] = value
        return ConfigRecord(record)

    @classmethod
    def from_config(cls, record: Mapping[str, Any], node_id: int = 0) -> ClientPlan:
        """Parse a ``jetpredict.plan`` record; InputError naming the key when it is malformed."""
        kwargs: dict[str, Any] = {"node_id": node_id}
        for f in fields(cls):
            key = f.name.replace("_", "-")
            if f.name in SERVER_ONLY_FIELDS:
                continue
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


#: ClientPlan field <- fleet-plan client field, scaled by the node's epoch scale (s and J of the work; the
#: idle energy is the node's own time to the deadline, :func:`_idle_j`).
_SCALED = (("time_s", "round_time_s"), ("time_s_low", "round_time_s_low"), ("time_s_high", "round_time_s_high"),
           ("energy_j", "train_energy_j"), ("energy_j_low", "train_energy_j_low"),
           ("energy_j_high", "train_energy_j_high"))
#: ClientPlan fields taken as they are (W: power does not scale with the work).
_AS_IS = ("avg_power_w", "avg_power_w_low", "avg_power_w_high")


#: A planning cache key: the planner, its confidence, the device, the planning deadline (s) and the epochs.
CacheKey = tuple[Any, Any, str, float, int]


class CacheEntry(NamedTuple):
    """A planning cache's entry for one key."""

    #: The fleet answer's client entry (or a refusal).
    entry: dict[str, Any]
    #: Calls it has served.
    served: int
    #: The planner's basis it was made under.
    basis: Hashable | None
    #: The round it was made in (None: not told).
    made_round: int | None
    #: The last call kept it, the planner unreachable.
    kept: bool


#: Rounds a cached plan (or refusal) serves before it is asked for again, for a planner that cannot say what
#: its plans rest on (:meth:`~.planners.FleetPlanner.basis` None or missing): a stored workload refitted
#: mid-run, or one uploaded for a device that was refused, reaches its plans within this many rounds.
PLAN_CACHE_ROUNDS = 10
#: Significant digits a node's epoch scale is read to before it is rounded up (0.1 + 0.2 is 0.3, not 0.31).
SCALE_DIGITS = 12
#: Plans a call makes again per device type for the nodes a shared plan misses but their own scale allows
#: (:func:`_straddler_groups`): enough that each is planned at its own scale when few straddle (the bench's
#: fleets), few enough that many add at most this many requests per device type.
STRADDLER_PLANS = 8


def read_scale(scale: float) -> float:
    """An epoch scale as nodes are grouped and planned at it: ``SCALE_DIGITS`` significant digits (binary
    noise is no work: 0.30000000000000004 is 0.3)."""
    return float(f"{scale:.{SCALE_DIGITS}g}")


def planning_scale(scale: float) -> float | None:
    """The epoch scale a node of epoch scale ``scale`` is planned at: ``scale`` rounded up to two significant
    digits (at most 10% above it; 0.0123 -> 0.013, 0.02 -> 0.02). Its deadline ``D / planning_scale`` is at
    most ``D / scale``, so the plan's mode meets the node's own deadline; None for a scale that is not a
    finite number > 0."""
    if not (math.isfinite(scale) and scale > 0):
        return None
    scale = read_scale(scale)
    mantissa, exponent = f"{scale:.1e}".split("e")
    digits, power = int(mantissa.replace(".", "")), int(exponent) - 1
    rounded = float(f"{digits}e{power}")  # decimal text: exact where the scale itself is two digits
    return rounded if rounded >= scale else float(f"{digits + 1}e{power}")


def _round_name(server_round: int | None) -> str:
    return "an earlier round" if server_round is None else f"round {server_round}"


def plan_nodes(planner: FleetPlanner, nodes: Iterable[NodeInfo], deadline_s: float, epochs: int,
               cache: dict[CacheKey, CacheEntry] | None = None, server_round: int | None = None
               ) -> dict[int, ClientPlan]:
    """One :class:`ClientPlan` per node with a known device, for ``epochs`` local epochs under ``deadline_s``
    (s; see the module docstring).

    Nodes are planned at :func:`planning_scale` of their epoch scale: one fleet plan per planning scale
    ``q`` among the nodes, under deadline ``deadline_s / q``, with one client per device type (a fleet
    plan chooses one mode per device type). A node whose plan misses ``deadline_s / q`` while the plan's
    fastest mode meets its own ``deadline_s / s`` is planned again: at its own scale where its device type
    has at most :data:`STRADDLER_PLANS` such scales, else with its neighbours in scale at the largest of
    theirs, ``s*`` (:func:`_straddler_groups`): the fastest mode meets ``deadline_s / s*``, so the mode
    planned there meets each of their deadlines (``s <= s*``; and ``s* < q``, as the scales straddling a
    device type's fastest mode share the planning scale above its reach). So a call makes at most
    ``G + 8 K`` plans per workload of the planner, ``G`` the planning scales among the nodes (at most 90
    per decade their scales span, plus one) and ``K`` their device types: 10,000 nodes over three decades,
    of the catalogue's six types, at most 271 + 48 = 319, within the service's default 600 requests a
    minute.
    ``cache``: client entries (and refusals) kept between calls (a strategy's, across rounds), keyed by
    :data:`CacheKey`, each with the calls it has served and the planner's basis
    (:meth:`~.planners.FleetPlanner.basis`, read once per call) it was made under: asked for again as soon
    as the basis differs (a stored workload refitted), or, for a planner that cannot say (None), after
    :data:`PLAN_CACHE_ROUNDS` calls; and when the planner, its confidence, the deadline or the epochs
    change. Entries no node used in a call are dropped. A round-wide failure
    reading the basis is handled as one of planning (below): nothing is asked this call; a refusal of the
    read leaves the basis unknown (the age rule) for this call.

    A plan the planner refuses for one planning scale or device (a service's limit on ``deadline_s / q``, a
    device without a workload, or a scale too small to divide by) leaves those nodes unplanned with the
    reason; when no node gets a plan, the refusal is raised (the caller skips the round). A failure that is
    not the request's own (:attr:`PlannerError.round_wide`: the service unreachable, overloaded, rate
    limiting, refusing the key, failing) stops the asking at once, as the other scales would fail alike,
    each after its retries: the nodes already planned (in this call or cached) keep their plans and the
    others are unplanned this round, with the failure; with no node planned, it is raised. A cached plan
    the planner would have been asked to confirm (its basis unreadable, or due by the age rule) is kept
    one call, :attr:`ClientPlan.kept` with its ``planned_round`` (``server_round``: the round of this call);
    the planner still down the next call, its nodes are unplanned with the failure."""
    cache = {} if cache is None else cache
    confidence = getattr(planner, "confidence", None)
    groups: dict[float, list[NodeInfo]] = {}
    plans: dict[int, ClientPlan] = {}
    refused: list[PlannerError] = []
    for node in nodes:
        if node.device is None:
            continue
        scale = float(node.epoch_scale)
        q = planning_scale(scale)
        if q is not None and math.isfinite(deadline_s / q):
            groups.setdefault(q, []).append(node)
            continue
        refused.append(PlannerError(f"epoch scale {scale:g} is too small: the deadline divided by it is not a "
                                    "finite number"))
        plans[node.node_id] = _unplanned(node, scale, deadline_s, epochs, f"not planned: {refused[-1]}")

    # Read before planning: a refit between the read and a plan tags that plan stale, asked again next
    # call, rather than a stale plan tagged current.
    basis, stopped = _read_basis(planner) if groups else (None, None)
    # A basis that could not be read confirms no cached plan: each is one the planner cannot be asked about.
    fresh = {} if stopped is not None else {k: v._replace(kept=False) for k, v in cache.items()
                                            if (v.served < PLAN_CACHE_ROUNDS if basis is None else v.basis == basis)}
    used: dict[CacheKey, CacheEntry] = {}
    waiting = 0  # nodes left unplanned this round by a round-wide failure

    def serve(q: float, group: list[NodeInfo], again: bool) -> list[NodeInfo]:
        """Plan ``group`` at scale ``q`` (deadline ``deadline_s / q``); the nodes whose plan missed that
        deadline but whose own (looser) one the plan's fastest mode meets, to be planned again
        (:func:`_straddler_groups`; ``again``: none, they are being)."""
        nonlocal stopped, waiting
        planning_deadline = deadline_s / q
        keys = {n.node_id: (planner, confidence, str(n.device), planning_deadline, epochs) for n in group}
        missing = list(dict.fromkeys(str(n.device) for n in group if keys[n.node_id] not in fresh))
        if missing and stopped is None:
            try:
                answer = planner.plan([{"id": d, "device": d} for d in missing], planning_deadline, epochs)
            except PlannerError as err:
                if err.round_wide:
                    stopped = err
                else:  # this request's own: kept, as a plan is, so it is not asked again every round
                    refused.append(err)
                    entries = [_refused_entry(d, q, deadline_s, err) for d in missing]
            else:
                entries = _entries(answer)
            if stopped is None:
                fresh.update({(planner, confidence, str(e["id"]), planning_deadline, epochs):
                              CacheEntry(e, 0, basis, server_round, False) for e in entries})
        deferred: list[NodeInfo] = []
        for node in group:
            scale, key = float(node.epoch_scale), keys[node.node_id]
            if key not in fresh and stopped is not None and key in cache and not cache[key].kept:
                # Unconfirmed, but the planner cannot be asked now: kept this one call (README's one more round).
                fresh[key] = cache[key]._replace(kept=True)
            if key not in fresh:
                waiting += 1
                again_down = f"; {_round_name(cache[key].made_round)}'s plan was kept one round already" if key in cache else ""
                plans[node.node_id] = _unplanned(node, scale, deadline_s, epochs,
                                                 f"not planned this round: the planner failed: {stopped}{again_down}")
                continue
            used.setdefault(key, fresh[key]._replace(served=fresh[key].served + 1))  # one more call served
            entry, made_round, kept = used[key].entry, used[key].made_round, used[key].kept
            high = as_float(entry.get("round_time_s_high"))
            if (not again and entry.get("mode") is not None and not entry.get("meets_deadline")
                    and high is not None and high * scale <= deadline_s):
                deferred.append(node)
                continue
            plan = (_unplanned(node, scale, deadline_s, epochs, str(entry["reason"])) if "refusal" in entry
                    else _client_plan(node, entry, scale, q, deadline_s, epochs))
            _add_provenance(plan, entry)
            plan.planned_round, plan.kept = made_round, kept
            plans[node.node_id] = plan
        return deferred

    deferred = [node for q, group in groups.items() for node in serve(q, group, again=False)]
    for scale, group in _straddler_groups(deferred).items():
        serve(scale, group, again=True)
    cache.clear()
    cache.update(used)
    if not any(c.entry.get("mode") is not None or "refusal" not in c.entry for c in used.values()):
        # No node has a plan or the planner's own word on it: nothing to train, say why.
        errors = [stopped] if stopped is not None else refused or [c.entry["refusal"] for c in used.values()]
        if errors:
            raise errors[0]
    if stopped is not None and used:
        kept_by_round = Counter(plan.planned_round for plan in plans.values() if plan.kept)
        said = [f"{n} node(s) keep {_round_name(r)}'s plans" for r, n in sorted(
            kept_by_round.items(), key=lambda kv: -1 if kv[0] is None else kv[0])]
        said += [f"{waiting} node(s) not planned this round"] if waiting else []
        planned_now = sum(plan.mode is not None and not plan.kept for plan in plans.values())
        said += [f"{planned_now} node(s) planned or confirmed this round"] if planned_now else []
        log.warning("%s; the planner failed (a plan is kept one round at most, and it is asked again next "
                    "round): %s", "; ".join(said), stopped)
    return plans


def _straddler_groups(deferred: Iterable[NodeInfo]) -> dict[float, list[NodeInfo]]:
    """The nodes whose shared plan missed while the fastest mode meets their own deadline, by the scale they
    are planned again at: per device type, their distinct scales in at most :data:`STRADDLER_PLANS` runs of
    neighbours, each node at the largest scale of its run (the fastest mode meets the deadline there too, so
    the plan made there meets each of theirs); with that many scales or fewer, each node at its own. So a
    device type costs at most that many requests however many scales straddle; device types of one such
    scale share one."""
    by_device: dict[str, list[NodeInfo]] = {}
    for node in deferred:
        by_device.setdefault(str(node.device), []).append(node)
    out: dict[float, list[NodeInfo]] = {}
    for nodes in by_device.values():
        scales = sorted({read_scale(float(n.epoch_scale)) for n in nodes})
        runs = [scales[i * len(scales) // STRADDLER_PLANS:(i + 1) * len(scales) // STRADDLER_PLANS]
                for i in range(STRADDLER_PLANS)]
        planned_at = {scale: run[-1] for run in runs if run for scale in run}
        for node in nodes:
            out.setdefault(planned_at[read_scale(float(node.epoch_scale))], []).append(node)
    return out


def _read_basis(planner: FleetPlanner) -> tuple[Hashable | None, PlannerError | None]:
    """``(basis, failure)``: the planner's :meth:`~.planners.FleetPlanner.basis` (None for a planner
    without one, or whose read was refused: the age rule serves), and a round-wide failure of the read."""
    read = getattr(planner, "basis", None)
    if not callable(read):
        return None, None
    try:
        return read(), None
    except PlannerError as err:
        if err.round_wide:
            return None, err
        log.warning("could not read what the fleet plans rest on (cached plans are asked for again after %d "
                    "rounds): %s", PLAN_CACHE_ROUNDS, err)
        return None, None


def _refused_entry(device: str, q: float, deadline_s: float, err: PlannerError) -> dict[str, Any]:
    """A cache entry standing for the planner's refusal of ``device`` at planning scale ``q``."""
    return {"id": device, "device": device, "mode": None, "meets_deadline": False, "refusal": err,
            "reason": f"not planned at epoch scale {q:g} (deadline {deadline_s:g} s / {q:g} = {deadline_s / q:.4g} "
                      f"s of profiled epochs): {err}"}


def _entries(answer: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The client entries of a fleet-plan answer, each with the answer's confidence and confidence note, and
    its top-level provenance for a key the entry lacks (what a cached entry needs on its own)."""
    top = {k: answer.get(k) for k in PROVENANCE_KEYS}
    return [{**top, **dict(c), "confidence": as_float(answer.get("confidence")),
             "confidence_note": answer.get("confidence_note")} for c in answer["clients"]]


def _unplanned(node: NodeInfo, scale: float, deadline_s: float, epochs: int, reason: str) -> ClientPlan:
    return ClientPlan(node_id=node.node_id, device=str(node.device), epoch_scale=scale, epochs=epochs,
                      deadline_s=deadline_s, meets_deadline=False, reason=reason)


def _add_provenance(plan: ClientPlan, entry: Mapping[str, Any]) -> None:
    """The entry's provenance (its own, else the answer's top-level one, as :func:`_entries` merged them);
    none for a node no model planned (its entry has a reason and no mode)."""
    if entry.get("mode") is None and not any(entry.get(k) is not None for k in PROVENANCE_KEYS):
        return
    for key in PROVENANCE_KEYS:
        value = entry.get(key)
        setattr(plan, key, None if value is None else int(value) if key == "profiled_modes" else str(value))


def _client_plan(node: NodeInfo, c: Mapping[str, Any], scale: float, q: float, deadline_s: float,
                 epochs: int) -> ClientPlan:
    """The plan of a node of epoch scale ``scale`` from the client entry ``c`` of the fleet plan made at
    planning scale ``q`` (deadline ``deadline_s / q``; see :func:`plan_nodes`)."""
    plan = ClientPlan(node_id=node.node_id, device=str(node.device), epoch_scale=scale, epochs=epochs,
                      deadline_s=deadline_s, meets_deadline=bool(c.get("meets_deadline")), reason=c.get("reason"),
                      confidence=as_float(c.get("confidence")), confidence_note=c.get("confidence_note"))
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
    plan.idle_energy_j = _idle_j(c, scale, q, deadline_s)
    plan.cross_device = None if c.get("cross_device") is None else bool(c["cross_device"])
    plan.power_source = None if c.get("power_source") is None else str(c["power_source"])
    if plan.meets_deadline or plan.reason is None:
        return plan
    if plan.time_s_high is not None and plan.reason.startswith(DEADLINE_MISS_PREFIX):
        # The service's reason quotes what it was asked: deadline D/q for profiled epochs, and the upper bound
        # the plan carries. Say it in the user's deadline and this node's time (the mode a plan that misses
        # names is the fastest it found).
        plan.reason = (f"cannot meet the {deadline_s:g} s deadline: the fastest planned mode, {plan.mode}, "
                       f"needs up to {plan.time_s_high:.4g} s for {epochs} local epoch(s) on this node")
    else:  # another planner's words rest on its own figures (an oracle's twin times): kept, with what it was asked
        plan.reason = (f"the planner, asked at epoch scale {q:g} (deadline {deadline_s:g} s / {q:g} = "
                       f"{deadline_s / q:.4g} s of profiled epochs), says: {plan.reason}")
    return plan


def _idle_j(c: Mapping[str, Any], scale: float, q: float, deadline_s: float) -> float | None:
    """The node's idle energy (J) from finishing until ``deadline_s``: the entry's base power (its idle
    energy over its idle time, ``deadline_s / q`` less its round time, in profiled s) times the node's own
    idle time. Exactly ``scale`` x the entry's when ``q == scale``."""
    idle, round_s = as_float(c.get("idle_energy_j")), as_float(c.get("round_time_s"))
    if idle is None or round_s is None or q == scale:
        return None if idle is None else idle * scale
    slack = deadline_s / q - round_s
    if idle <= 0.0 or slack <= 0.0:  # no idle time in the plan: the base power is not in it
        return idle * scale
    return idle / slack * max(0.0, deadline_s - scale * round_s)
