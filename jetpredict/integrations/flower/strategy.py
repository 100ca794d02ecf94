"""Server side: :class:`JetpredictStrategy` wraps any Flower strategy of the Message API (``FedAvg`` first).

Each training round it

1. learns the Jetson type and epoch scale of every connected node, once per node, by the device query
   (``query.jetpredict``; a node whose app has only the mod is asked again by a ``train`` message
   holding only a ``jetpredict.query`` record, which the mod answers without training; an app without
   the mod hands that message to its own train function, so such a node is sent it once per run);
2. asks the fleet planner for one plan per planning scale (an epoch scale at two significant digits,
   :func:`~.plans.plan_nodes`), reusing the plans of earlier rounds while its inputs stay the same; a
   scale the planner refuses leaves only its nodes unplanned, and the round is skipped when it refuses
   every scale; a failure that is not the request's own (the service unreachable or rate limiting, say)
   stops the asking: the nodes planned so far train, the others wait for the next round, and with none
   planned the round is skipped;
3. lets the wrapped strategy sample, on a Grid that shows it only the planned nodes
   (:class:`PlannedNodesGrid`), among the nodes whose plan meets the deadline with its upper time bound
   (optionally only the cheapest fraction of them, in energy per unit of local work, but never fewer
   than its ``min_train_nodes``); its settings are left as they are, but for ``min_available_nodes``,
   lowered to the number of planned nodes for that one call (the connected nodes met it already, in
   step 1) so that it samples among them and does not wait for more;
4. puts each node's plan into a ``jetpredict.plan`` ConfigRecord of its train message;
5. records, per round and node, predicted against reported time and energy (:attr:`JetpredictStrategy.
   records`), strips the ``jetpredict-*`` metrics from the replies before the wrapped strategy aggregates
   them and adds round totals (``jetpredict-*``) to the aggregated train metrics.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields
from typing import Any

from flwr.app import ConfigRecord, Message, MetricRecord, RecordDict
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Strategy

from jetpredict.integrations.flower.planners import FleetPlanner, LocalPlanner, PlannerError
from jetpredict.integrations.flower.plans import ClientPlan, NodeInfo, PlanProvenance, plan_nodes
from jetpredict.integrations.flower.wire import (
    DEVICE_KEY,
    ENERGY_METRIC,
    ENERGY_REPORTED_METRIC,
    EPOCH_SCALE_KEY,
    EXCLUDED_METRIC,
    FAILED_METRIC,
    MISSES_METRIC,
    NODE_RECORD,
    PLAN_RECORD,
    PRED_ENERGY_METRIC,
    QUERY_ACTION,
    QUERY_RECORD,
    QUERY_TYPE,
    ROUND_TIME_METRIC,
    SELECTED_METRIC,
    as_float,
    read_report,
    strip_metrics,
)
from jetpredict.models.catalogue import load_device
from jetpredict.models.errors import InputError
from jetpredict.models.numbers import checked_number
from jetpredict.predictor.checks import check_epochs

log = logging.getLogger(__name__)
#: Why a node that meets the deadline did not train: the round's own sampling, not a fault to report.
NOT_CHEAPEST = "not among the cheapest fraction"
NOT_SAMPLED = "not sampled by the wrapped strategy"
#: The most reasons for leaving nodes out that one round's log states, the most common first.
MAX_REASONS_TOLD = 5

#: What a Flower ClientApp answers to a message type it has no function for (flwr 1.x ClientApp).
_UNROUTED = f"No query function registered with name '{QUERY_ACTION}'"
#: How long a round waits for the nodes it needs to connect (s): SuperNodes started with the run connect
#: within seconds to minutes; none connecting in 10 minutes is a deployment fault, better named than waited on.
DEFAULT_NODE_WAIT_S = 600.0
#: The reason of a selected node whose train reply carries no ``jetpredict.report`` (its deadline unknown).
_UNREPORTED = "replied without a jetpredict report (no jetpredict_mod or PlannedRound in its train)"


def failure_reason(reply: Message) -> str:
    """Why a node's train ``reply`` failed, in the words every record of it uses: its error's reason."""
    return f"training failed: {reply.error.reason}"


class DeviceQueryError(RuntimeError):
    """Too few nodes connected within the strategy's ``node_wait_timeout_s``, or answered the device query
    within its ``query_timeout_s``."""


@dataclass
class ClientRecord(PlanProvenance):
    """One node in one round: its plan (``pred_*``), whether it trained, and what it reported.

    Times in s, energies in J (training of the round's local epochs), power in W. ``reported_energy_j`` is
    None when the node had no power meter (``energy_null_reason`` says why); ``source`` is ``measured`` or
    ``simulated`` (digital twin; ``twin_workload``: the workload its twin costed). ``failed``: its training
    raised (an error reply; ``reason`` gives the error). ``deadline_missed``: reported time above the deadline,
    or no reply from a selected node; None (unknown) for a reply without a ``jetpredict.report`` or a failed
    node, with ``reason`` saying why; a selected node's ``reason`` says when its plan was kept from an earlier
    round (the planner unreachable). ``confidence_note``: the plan's word on its confidence; the fields of
    :class:`~.plans.PlanProvenance`: what the plan's prediction rests on."""

    round: int
    node_id: int
    device: str | None
    epoch_scale: float | None
    selected: bool
    reason: str | None = None
    mode: str | None = None
    pred_time_s: float | None = None
    pred_time_s_low: float | None = None
    pred_time_s_high: float | None = None
    pred_energy_j: float | None = None
    pred_energy_j_low: float | None = None
    pred_energy_j_high: float | None = None
    pred_avg_power_w: float | None = None
    replied: bool = False
    failed: bool = False
    reported_time_s: float | None = None
    reported_energy_j: float | None = None
    energy_null_reason: str | None = None
    reported_avg_power_w: float | None = None
    reported_base_power_w: float | None = None
    source: str | None = None
    mode_applied: bool | None = None
    twin_workload: str | None = None
    deadline_missed: bool | None = None
    confidence_note: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The record as a row: its own fields, then the plan's provenance, the columns' order since before
        :class:`~.plans.PlanProvenance` held those (a dataclass lists a base class's fields first)."""
        row = asdict(self)
        last = {f.name for f in fields(PlanProvenance)}
        return {**{k: v for k, v in row.items() if k not in last}, **{k: v for k, v in row.items() if k in last}}

    def add_plan(self, plan: ClientPlan) -> None:
        """Take the plan's mode, predicted figures and their provenance (and its reason when it misses the
        deadline, or that it is kept from an earlier round, the planner unreachable)."""
        self.reason = plan.kept_reason() if plan.meets_deadline else (plan.reason or "cannot meet the deadline")
        self.mode = plan.mode
        self.pred_time_s, self.pred_time_s_low, self.pred_time_s_high = plan.time_s, plan.time_s_low, plan.time_s_high
        self.pred_energy_j, self.pred_energy_j_low, self.pred_energy_j_high = (
            plan.energy_j, plan.energy_j_low, plan.energy_j_high)
        self.pred_avg_power_w = plan.avg_power_w
        self.confidence_note = plan.confidence_note
        for key, value in plan.provenance().items():
            setattr(self, key, value)

    def add_report(self, reply: Message) -> None:
        """Take what the node reported in its train reply (an error reply: the node failed, and why)."""
        self.replied = not reply.has_error()
        if reply.has_error():
            self.failed = True
            self.reason = failure_reason(reply)
        report = read_report(reply)
        if report is not None:
            self.reported_time_s = as_float(report.get("time-s"))
            self.reported_energy_j = as_float(report.get("energy-j"))
            self.energy_null_reason = report.get("energy-null-reason")
            self.reported_avg_power_w = as_float(report.get("avg-power-w"))
            self.reported_base_power_w = as_float(report.get("base-power-w"))
            self.source = report.get("source")
            self.mode_applied = report.get("mode-applied")
            self.twin_workload = report.get("twin-workload")  # what a simulated node's twin costed


class PlannedNodesGrid(Grid):
    """The Grid a wrapped strategy samples on: it lists only the planned nodes; all else is the real grid's.

    A strategy waits until its ``min_available_nodes`` are listed; :class:`JetpredictStrategy` lowers that
    setting to the planned nodes for the call (:func:`_sampling_among`), so no unplanned node is listed to
    take a planned node's place in the sample.
    """

    def __init__(self, grid: Grid, node_ids: Sequence[int]) -> None:
        self._grid = grid
        self._node_ids = list(node_ids)

    def set_run(self, run_id: int) -> None:  # pragma: no cover - strategies do not call it
        self._grid.set_run(run_id)

    @property
    def run(self) -> Any:  # pragma: no cover
        return self._grid.run

    def create_message(self, content: RecordDict, message_type: str, dst_node_id: int, group_id: str,
                       ttl: float | None = None) -> Message:
        return self._grid.create_message(content, message_type, dst_node_id, group_id, ttl)

    def get_node_ids(self) -> Iterable[int]:
        return list(self._node_ids)

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        return self._grid.push_messages(messages)

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        return self._grid.pull_messages(message_ids)

    def send_and_receive(self, messages: Iterable[Message], *, timeout: float | None = None
                         ) -> Iterable[Message]:
        return self._grid.send_and_receive(messages, timeout=timeout)


def _node_info(node: int, reply: Message) -> NodeInfo:
    """Parse a node's answer to the device query (an unusable answer gives a NodeInfo with a reason)."""
    if reply.has_error():  # the app's own error (a missing mod is told apart by _no_mod_reason)
        return NodeInfo(node, None, reason=f"device query failed: {reply.error.reason}")
    record = reply.content.config_records.get(NODE_RECORD)
    if record is None:
        return NodeInfo(node, None, reason=f"the reply to the device query has no {NODE_RECORD} record")
    device = record.get("device")
    if not device:
        return NodeInfo(node, None, reason=str(record.get("reason") or f"node config has no {DEVICE_KEY}"))
    try:
        load_device(str(device))
        scale = checked_number(record.get("epoch-scale", 1.0), EPOCH_SCALE_KEY)
    except InputError as err:
        return NodeInfo(node, None, reason=f"node {node}: {err.message}")
    return NodeInfo(node, str(device), scale)


def _wrapped_chain(strategy: Strategy) -> Iterator[Any]:
    """``strategy`` and the strategies it wraps (Flower's DP wrappers hold theirs as ``.strategy``)."""
    seen: set[int] = set()
    while strategy is not None and id(strategy) not in seen:
        seen.add(id(strategy))
        yield strategy
        strategy = getattr(strategy, "strategy", None)


def _setting(strategy: Strategy, name: str) -> int:
    """A count setting of the wrapped strategy, or of the one it wraps (0 when none has it)."""
    return next((int(getattr(s, name) or 0) for s in _wrapped_chain(strategy) if hasattr(s, name)), 0)


@contextmanager
def _sampling_among(strategy: Strategy, listed: int) -> Iterator[None]:
    """Within the block, ``min_available_nodes`` of ``strategy`` (and of the strategies it wraps) is at
    most ``listed``, the planned nodes on the :class:`PlannedNodesGrid`; restored on leaving.

    Flower's ``sample_nodes`` waits on the Grid it is given until ``min_available_nodes`` are listed and
    samples among exactly those, so the only way to wait on no unplanned node is to lower the minimum. The
    minimum was met where it means something: the strategy waited for that many connected nodes, and heard
    from them, before planning (:meth:`JetpredictStrategy._discover`).
    """
    saved = [(s, s.min_available_nodes) for s in _wrapped_chain(strategy)
             if isinstance(getattr(s, "min_available_nodes", None), int)]
    try:
        for owner, value in saved:
            owner.min_available_nodes = min(value, listed)
        yield
    finally:
        for owner, value in saved:
            owner.min_available_nodes = value


def _no_mod_reason(reply: Message) -> str | None:
    """Why a node's reply to the device query sent as a train message shows that its ClientApp has no
    jetpredict mod (its own train function, if any, got the query); None when the mod answered."""
    if reply.has_error():
        detail = f"is an error ({reply.error.reason})"
    elif NODE_RECORD not in reply.content.config_records:
        detail = f"has no {NODE_RECORD} record: the app's own train function answered it"
    else:
        return None
    return (f"the ClientApp has no jetpredict mod: its reply to the device query (a train message holding "
            f"only {QUERY_RECORD}) {detail}; give it mods=[jetpredict_mod(...)] or add_device_query(app)")


def _unrouted(reply: Message) -> bool:
    """True when the node's app has no function for ``query.jetpredict`` (only the mod, or nothing)."""
    return reply.has_error() and _UNROUTED in str(reply.error.reason)


def _why_skipped(records: dict[int, ClientRecord], plans: dict[int, ClientPlan], feasible: list[int],
                 deadline_s: float, need: int) -> str:
    """Why a round with fewer than ``need`` nodes that meet ``deadline_s`` (s) trains none: the planned node
    that misses it by least (its upper time bound, s) and the other nodes' reasons, counted."""
    timed = {n: p for n, p in plans.items() if n not in feasible and p.time_s_high is not None}
    said = (f"{len(feasible)} node(s) meet the {deadline_s:g} s deadline" if feasible or timed
            else "no node was planned") + f", the wrapped strategy trains at least {need}"
    if timed:
        n, p = min(timed.items(), key=lambda kv: (kv[1].time_s_high, kv[0]))
        said += (f"; the fastest planned node that misses it, node {n} ({p.device}), needs up to "
                 f"{p.time_s_high:.4g} s at {p.mode}")
    by_reason = _nodes_by_reason({n: r for n, r in records.items() if n not in feasible and n not in timed})
    if by_reason:  # as the log of nodes left out: the commonest reasons (ranked already), the rest counted
        said += (f"; left out {sum(map(len, by_reason.values()))} node(s): "
                 + "; ".join(f"{reason} ({len(nodes)})"
                             for reason, nodes in list(by_reason.items())[:MAX_REASONS_TOLD])
                 + (f"; and {len(by_reason) - MAX_REASONS_TOLD} more reason(s) (each node's record holds its own)"
                    if len(by_reason) > MAX_REASONS_TOLD else ""))
    return said


def _nodes_by_reason(records: Mapping[int, ClientRecord]) -> dict[str, list[int]]:
    """The nodes of ``records`` by the reason each was left out (those with a reason), the commonest reason
    first (then by its words), as the log and the skipped round tell them."""
    out: dict[str, list[int]] = {}
    for n, record in records.items():
        if record.reason:
            out.setdefault(record.reason, []).append(n)
    return {r: out[r] for r in sorted(out, key=lambda r: (-len(out[r]), r))}


class JetpredictStrategy(Strategy):
    """Wraps a Flower strategy: trains only nodes whose planned mode meets the round deadline, and tells
    each one its mode and predicted time, energy and power (see the module docstring).

    ``planner``: a :class:`~.planners.LocalPlanner`, :class:`~.planners.HttpPlanner`, any object with
    ``plan`` (:class:`~.planners.FleetPlanner`), or a fitted model / model path / mapping device -> model
    (made into a LocalPlanner). ``deadline_s``: the round deadline for the local training (s).
    ``local_epochs``: local epochs per round (also sent to the nodes as ``epochs``). ``cheapest_fraction``:
    keep only this share (0, 1] of the nodes that meet the deadline, those of least planned energy
    (training + idle until the deadline) per unit of local work, but no fewer than the wrapped strategy's
    ``min_train_nodes``. ``query_timeout_s``: how long each exchange of the device query waits for
    replies (s). ``node_wait_timeout_s``: how long a round waits for the wrapped strategy's
    ``min_available_nodes`` to connect before it raises :class:`DeviceQueryError` (s; Flower's own sampling
    waits without end, which hangs a run whose nodes never come). It must hear from at least the wrapped
    strategy's ``min_available_nodes`` (an error
    reply is not heard: it is logged, with the node), or it raises :class:`DeviceQueryError` (a round
    planned on fewer nodes would train a different federation than asked for); further nodes that do
    not answer (or answer with an error) are asked again the next round,
    but not a node whose app has no jetpredict mod (its own train function would get the query) or whose
    answer names no usable device (its node config stays as it is while it is connected).
    """

    def __init__(self, strategy: Strategy, planner: Any, deadline_s: float, local_epochs: int = 1,
                 cheapest_fraction: float | None = None, query_timeout_s: float = 60.0,
                 node_wait_timeout_s: float = DEFAULT_NODE_WAIT_S) -> None:
        if not isinstance(strategy, Strategy):
            raise InputError("strategy must be a Flower Message-API Strategy (flwr.serverapp.strategy)",
                             "strategy")
        # The project's one check, an InputError naming the field: a bare float() took True as 1 and failed
        # on "ten" or None with a TypeError/ValueError that named nothing.
        deadline = checked_number(deadline_s, "deadline_s")
        epochs = check_epochs(local_epochs, "local_epochs")
        if epochs is None:  # absent is no number of epochs here: a round trains some
            raise InputError("local_epochs must be a whole number from 1, got None", "local_epochs")
        fraction = None if cheapest_fraction is None else checked_number(
            cheapest_fraction, "cheapest_fraction", high=1.0, hint=" (0 excluded, 1 included)")
        self.inner = strategy
        self.planner: FleetPlanner = planner if hasattr(planner, "plan") else LocalPlanner(planner)
        self.deadline_s = deadline
        self.local_epochs = epochs
        self.cheapest_fraction = fraction
        self.query_timeout_s = checked_number(query_timeout_s, "query_timeout_s")
        self.node_wait_timeout_s = checked_number(node_wait_timeout_s, "node_wait_timeout_s")
        #: Every (round, node) record, in order; see :class:`ClientRecord`.
        self.records: list[ClientRecord] = []
        self._nodes: dict[int, NodeInfo] = {}
        #: Nodes not asked again: an app without the jetpredict mod (a query as a train message would reach
        #: its train function), or an answer that names no usable device (a node's config is fixed while it
        #: stays connected, so it would answer the same every round).
        self._settled: dict[int, NodeInfo] = {}
        self._round_records: dict[int, dict[int, ClientRecord]] = {}
        self._notes_told: set[str] = set()
        #: Fleet-plan entries kept across rounds (:func:`~.plans.plan_nodes`): asked again when what the
        #: planner's plans rest on changes (a stored workload refitted; after PLAN_CACHE_ROUNDS rounds for a
        #: planner that cannot say), the planner, its confidence, the deadline or the epochs change, or a
        #: node's planning scale is new.
        self._plan_cache: dict = {}

    def _inner_int(self, name: str) -> int:
        """A count setting of the wrapped strategy (0 when it has none)."""
        return _setting(self.inner, name)

    def summary(self) -> None:
        log.info("JetpredictStrategy: deadline %.4g s, %d local epoch(s), planner %s, cheapest fraction %s",
                 self.deadline_s, self.local_epochs, type(self.planner).__name__, self.cheapest_fraction)
        self.inner.summary()

    # -- device discovery -------------------------------------------------------------------------------
    def _ask(self, grid: Grid, nodes: Sequence[int], as_train: bool) -> dict[int, Message]:
        """Send the device query to ``nodes`` (as a train message when ``as_train``); replies by node."""
        keys = ConfigRecord({"keys": [DEVICE_KEY, EPOCH_SCALE_KEY]})
        content, kind = (({QUERY_RECORD: keys}, "train") if as_train else ({"config": keys}, QUERY_TYPE))
        messages = [Message(content=RecordDict(content), dst_node_id=n, message_type=kind) for n in nodes]
        return {r.metadata.src_node_id: r for r in grid.send_and_receive(messages, timeout=self.query_timeout_s)}

    def _discover(self, grid: Grid) -> dict[int, NodeInfo]:
        need = max(1, self._inner_int("min_available_nodes"))
        told, since = None, time.monotonic()
        while len(node_ids := list(grid.get_node_ids())) < need:
            waited = time.monotonic() - since
            if waited >= self.node_wait_timeout_s:
                raise DeviceQueryError(
                    f"waiting for nodes: {len(node_ids)} of the {need} nodes needed (min_available_nodes) "
                    f"connected within node_wait_timeout_s={self.node_wait_timeout_s:g} s; raise "
                    "node_wait_timeout_s or check that the SuperNodes are started and reach the SuperLink")
            if len(node_ids) != told:  # as Flower's sampling waits, but one line per change, not per second
                told = len(node_ids)
                log.info("JetpredictStrategy: waiting for nodes (%d connected, %d required)", told, need)
            time.sleep(min(1.0, self.node_wait_timeout_s - waited))
        unknown = [n for n in node_ids if n not in self._nodes and n not in self._settled]
        answers: dict[int, NodeInfo] = {}
        if unknown:
            t0 = time.monotonic()
            replies = self._ask(grid, unknown, as_train=False)
            mod_only = [n for n, reply in replies.items() if _unrouted(reply)]
            as_train = self._ask(grid, mod_only, as_train=True) if mod_only else {}
            # A node late to the second ask has not answered yet (its first reply only sent it there).
            replies = {**{n: r for n, r in replies.items() if n not in mod_only}, **as_train}
            settled: dict[str, list[int]] = {}
            failed: dict[str, list[int]] = {}
            for node, reply in replies.items():
                # Only an answer to the query sent as a train message shows that the app lacks the mod.
                reason = _no_mod_reason(reply) if node in as_train else None
                answers[node] = _node_info(node, reply) if reason is None else NodeInfo(node, None, reason=reason)
                if answers[node].device is not None:
                    self._nodes[node] = answers[node]
                elif reason is not None or not reply.has_error():
                    # No mod, or the node's own config names no usable device; an error may pass.
                    self._settled[node] = answers[node]
                    settled.setdefault(str(answers[node].reason), []).append(node)
                else:  # the app raised on the query: no answer, asked again
                    failed.setdefault(str(reply.error.reason), []).append(node)
            for reason, nodes in settled.items():  # once per node: such nodes are not asked again
                log.warning("JetpredictStrategy: node(s) %s not trained: %s; not asked again while connected",
                            ", ".join(map(str, nodes)), reason)
            for reason, nodes in failed.items():
                log.warning("JetpredictStrategy: device query failed on node(s) %s: %s; asked again next round",
                            ", ".join(map(str, nodes)), reason)
            heard = sum(n in self._nodes or n in self._settled for n in node_ids)
            if heard < need:
                # Planning on whoever answered would silently train a smaller federation (or nobody).
                errors = sum(map(len, failed.values()))
                raise DeviceQueryError(
                    f"device query: {heard} of the {need} nodes needed (min_available_nodes; {len(node_ids)} "
                    f"connected) answered within query_timeout_s={self.query_timeout_s:g} s "
                    f"(waited {time.monotonic() - t0:.1f} s"
                    + (f"; {errors} answered with an error, logged" if errors else "")
                    + "); raise query_timeout_s or check the SuperNodes")
            if len(answers) < len(unknown):
                log.warning("JetpredictStrategy: %d node(s) did not answer the device query within %g s; "
                            "asked again next round", len(unknown) - len(answers), self.query_timeout_s)
        return {n: self._nodes.get(n) or self._settled.get(n) or answers.get(n)
                or NodeInfo(n, None, reason="no reply to the device query") for n in node_ids}

    # -- training rounds --------------------------------------------------------------------------------
    def configure_train(self, server_round: int, arrays: Any, config: ConfigRecord, grid: Grid
                        ) -> Iterable[Message]:
        """Plan the round, let the wrapped strategy sample among the nodes that meet the deadline, and add
        each node's plan to its message."""
        nodes = self._discover(grid)
        records = {n: ClientRecord(round=server_round, node_id=n, device=info.device,
                                   epoch_scale=info.epoch_scale if info.device else None, selected=False,
                                   reason=info.reason) for n, info in nodes.items()}
        self._round_records[server_round] = records
        self.records.extend(records.values())
        try:
            plans = plan_nodes(self.planner, nodes.values(), self.deadline_s, self.local_epochs, self._plan_cache,
                               server_round)
        except PlannerError as err:
            # No plan, no training: an unplanned round could straggle past the deadline. Retried next round.
            log.error("JetpredictStrategy: round %d skipped: %s", server_round, err)
            for record in records.values():
                record.reason = record.reason or f"round skipped: the planner failed: {err}"
            return []
        for n, plan in plans.items():
            records[n].add_plan(plan)
        for note in sorted({p.confidence_note for p in plans.values() if p.confidence_note} - self._notes_told):
            log.warning("JetpredictStrategy: %s", note)
            self._notes_told.add(note)
        feasible = [n for n in nodes if n in plans and plans[n].meets_deadline]
        need = max(1, self._inner_int("min_train_nodes"))
        if len(feasible) < need:
            log.warning("JetpredictStrategy: round %d skipped: %s", server_round,
                        _why_skipped(records, plans, feasible, self.deadline_s, need))
            for record in records.values():
                record.reason = record.reason or (f"round skipped: only {len(feasible)} node(s) meet the "
                                                  f"{self.deadline_s:g} s deadline, the wrapped strategy trains "
                                                  f"at least {need}")
            return []
        eligible = self._eligible(plans, feasible, need)
        chosen = set(eligible)
        for n in set(feasible) - chosen:
            records[n].reason = NOT_CHEAPEST
        with _sampling_among(self.inner, len(eligible)):
            sampled = list(self.inner.configure_train(server_round, arrays, config, PlannedNodesGrid(grid, eligible)))
        messages = [m for m in sampled if m.metadata.dst_node_id in chosen]  # a strategy's own extras: not planned
        for message in messages:
            node = message.metadata.dst_node_id
            message.content = RecordDict({**dict(message.content.items()), PLAN_RECORD: plans[node].to_config()})
            records[node].selected = True
        for n in chosen:
            if not records[n].selected:
                records[n].reason = NOT_SAMPLED
        self._tell_left_out(server_round, records)
        return messages

    def _tell_left_out(self, server_round: int, records: dict[int, ClientRecord]) -> None:
        """Log each reason a node was left out (no device, no model, the deadline), once per run: the records
        keep every node's, but a run's user reads the log. The wrapped strategy's sampling is no news."""
        left_out = _nodes_by_reason({n: r for n, r in records.items()
                                     if not r.selected and r.reason not in (NOT_CHEAPEST, NOT_SAMPLED)})
        new = [r for r in left_out if r not in self._notes_told]
        for reason in new[:MAX_REASONS_TOLD]:
            log.warning("JetpredictStrategy: round %d: node(s) %s left out: %s", server_round,
                        ", ".join(map(str, sorted(left_out[reason]))), reason)
        if len(new) > MAX_REASONS_TOLD:  # a fleet's deadline reasons differ per node (each one's time)
            log.warning("JetpredictStrategy: round %d: %d more node(s) left out for %d other reasons (each "
                        "node's record holds its own)", server_round,
                        sum(len(left_out[r]) for r in new[MAX_REASONS_TOLD:]), len(new) - MAX_REASONS_TOLD)
        self._notes_told.update(new)

    def _eligible(self, plans: dict[int, ClientPlan], feasible: list[int], need: int) -> list[int]:
        """The nodes the wrapped strategy may sample: those that meet the deadline, or their cheapest fraction,
        topped up to the ``need`` the wrapped strategy trains (the fraction caps cost; it is no reason to
        skip a round that enough feasible nodes could train)."""
        if self.cheapest_fraction is None or not feasible:
            return feasible

        def cost(n: int) -> float:
            p = plans[n]
            return ((p.energy_j or 0.0) + (p.idle_energy_j or 0.0)) / p.epoch_scale

        return sorted(feasible, key=cost)[:max(need, math.ceil(self.cheapest_fraction * len(feasible)))]

    def aggregate_train(self, server_round: int, replies: Iterable[Message]) -> tuple[Any, MetricRecord | None]:
        """Record each node's report, hide the ``jetpredict-*`` metrics from the wrapped strategy, and add
        the round's totals to the aggregated metrics."""
        replies = list(replies)
        records = self._round_records.get(server_round, {})
        for reply in replies:
            record = records.get(reply.metadata.src_node_id)
            if record is not None:
                record.add_report(reply)
            strip_metrics(reply)
        unreported = []
        for record in records.values():
            if not record.selected:
                continue
            if record.failed:  # it ended with an error, not late: whether it would have met the deadline is unknown
                record.deadline_missed = None
                continue
            if record.replied and record.reported_time_s is None:
                # It trained, but its app times nothing: whether it met the deadline is unknown, not a miss.
                record.deadline_missed = None
                record.reason = _UNREPORTED
                unreported.append(record.node_id)
            else:
                record.deadline_missed = not record.replied or record.reported_time_s > self.deadline_s
        if unreported:
            log.warning("JetpredictStrategy: round %d: node(s) %s %s; deadline unknown", server_round,
                        ", ".join(map(str, sorted(unreported))), _UNREPORTED)
        arrays, metrics = self.inner.aggregate_train(server_round, replies)
        totals = self.round_totals(server_round)
        if totals:
            metrics = MetricRecord() if metrics is None else metrics
            for key, value in totals.items():
                metrics[key] = value
        return arrays, metrics

    def round_totals(self, server_round: int) -> dict[str, float]:
        """The round's figures: nodes selected and excluded, deadline misses (not a reply without a report:
        its deadline is unknown, :attr:`ClientRecord.deadline_missed` None), failures (an error reply,
        :attr:`ClientRecord.failed`: counted here, not as a miss), longest reported time (s),
        nodes that reported energy, and the reported and predicted training energy (J) of the selected nodes
        that replied. The energies are left out unless every such node reported energy (and, for the
        predicted one, had a predicted energy): a sum over some of them would pass for the round's."""
        records = self._round_records.get(server_round, {})
        selected = [r for r in records.values() if r.selected]
        if not records:
            return {}
        replied = [r for r in selected if r.replied]
        with_energy = [r for r in replied if r.reported_energy_j is not None]
        out: dict[str, float] = {
            SELECTED_METRIC: len(selected), EXCLUDED_METRIC: len(records) - len(selected),
            MISSES_METRIC: sum(bool(r.deadline_missed) for r in selected),
            FAILED_METRIC: sum(r.failed for r in selected), ENERGY_REPORTED_METRIC: len(with_energy)}
        if times := [r.reported_time_s for r in selected if r.reported_time_s is not None]:
            out[ROUND_TIME_METRIC] = max(times)
        if replied and len(with_energy) == len(replied):
            out[ENERGY_METRIC] = math.fsum(r.reported_energy_j for r in with_energy)
            predicted = [r.pred_energy_j for r in with_energy if r.pred_energy_j is not None]
            if len(predicted) == len(with_energy):
                out[PRED_ENERGY_METRIC] = math.fsum(predicted)
        elif with_energy:
            # MetricRecord has no null: the missing total and the count above are the reason, logged once.
            log.warning("JetpredictStrategy: round %d energy unknown: %d of %d node(s) that replied reported "
                        "none (%s)", server_round, len(replied) - len(with_energy), len(replied),
                        "; ".join(sorted({r.energy_null_reason or "no reason given"
                                          for r in replied if r.reported_energy_j is None})))
        return out

    # -- evaluation: the wrapped strategy's, unchanged --------------------------------------------------
    def configure_evaluate(self, server_round: int, arrays: Any, config: ConfigRecord, grid: Grid
                           ) -> Iterable[Message]:
        return self.inner.configure_evaluate(server_round, arrays, config, grid)

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]) -> MetricRecord | None:
        return self.inner.aggregate_evaluate(server_round, replies)
