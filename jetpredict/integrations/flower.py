"""Flower integration: pick the clients and power modes of each federated round from jetpredict fleet plans.

Server side, :class:`JetpredictStrategy` wraps any Flower strategy of the Message API (``FedAvg`` first).
Each training round it

1. learns the Jetson type of every connected node, once per node, by a ``query.jetpredict`` message
   that :func:`add_device_query` answers on the client from the node config (``jetpredict-device =
   "nano"``, and optionally ``jetpredict-epoch-scale``: the node's local epoch as a multiple of the
   epoch the workload was profiled on, e.g. its share of the dataset);
2. asks the fleet planner for the round's plan under the round deadline and the local epochs, in
   process (:class:`LocalPlanner`, fitted workload models) or over HTTP (:class:`HttpPlanner`,
   ``POST /v1/fleet-plans``); a node with epoch scale ``s`` is planned under deadline ``D / s`` and its
   figures scaled by ``s``, which is exact because epoch time and energy are proportional to the work;
3. lets the wrapped strategy sample only among the nodes whose plan meets the deadline with its upper
   time bound (optionally only the cheapest fraction of them, in energy per unit of local work);
4. puts each node's mode and predicted time, energy and power, with intervals, into a ``jetpredict.plan``
   ConfigRecord of its train message;
5. records, per round and node, predicted against reported time and energy (:attr:`~JetpredictStrategy.
   records`), strips the ``jetpredict-*`` metrics from the replies before the wrapped strategy aggregates
   them (nodes without a power meter report no energy, so the keys differ between nodes) and adds
   round totals (``jetpredict-*``) to the aggregated train metrics.

Client side, :class:`PlannedRound` is the context manager of a ``ClientApp`` train function: it applies
the planned mode through the profiler's power-mode controllers and restores the previous mode on every
exit path (exception, SIGINT, SIGTERM), and measures the round's time (s, ``time.perf_counter``) and
module energy (J) with jetpredict's power meters, or reports energy as unknown with the reason. With a
:class:`TwinWorkload` it touches no hardware: time and energy are the digital twin's for the planned
device and mode, reported with ``source = "simulated"``. :meth:`PlannedRound.attach` puts the figures into
the reply (``jetpredict-*`` metrics plus a ``jetpredict.report`` ConfigRecord).

Needs the ``[flower]`` extra: ``pip install 'jetpredict[flower]'``.
"""

from __future__ import annotations

try:
    from flwr.app import ConfigRecord, Context, Message, MetricRecord, RecordDict
    from flwr.serverapp import Grid
    from flwr.serverapp.strategy import Strategy
except ImportError as _missing:  # pragma: no cover - exercised by a subprocess test without Flower
    raise ImportError(
        "jetpredict.integrations.flower needs Flower (flwr >= 1.42, Message API), which is not installed: "
        "pip install 'jetpredict[flower]'") from _missing

import json
import logging
import math
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

from jetpredict.models.catalogue import PowerMode, load_device
from jetpredict.models.errors import InputError
from jetpredict.models.numbers import checked_number

log = logging.getLogger(__name__)

#: Node config keys (``flower-supernode --node-config 'jetpredict-device="nano"'``).
DEVICE_KEY = "jetpredict-device"
EPOCH_SCALE_KEY = "jetpredict-epoch-scale"
#: Message type of the device query (``ClientApp.query("jetpredict")`` answers it).
QUERY_ACTION = "jetpredict"
QUERY_TYPE = f"query.{QUERY_ACTION}"
#: RecordDict keys: the node's answer to the query, the plan in a train message, the report in a reply.
NODE_RECORD = "jetpredict.node"
PLAN_RECORD = "jetpredict.plan"
REPORT_RECORD = "jetpredict.report"
#: Prefix of the metrics a client adds to its reply's MetricRecord.
METRIC_PREFIX = "jetpredict-"
#: Reported time and energy (metric keys); energy is absent when unknown (MetricRecord has no null).
TIME_METRIC = "jetpredict-time-s"
ENERGY_METRIC = "jetpredict-energy-j"
POWER_METRIC = "jetpredict-avg-power-w"
SIMULATED_METRIC = "jetpredict-simulated"
#: Mode fields carried in a plan, with their ConfigRecord keys.
_MODE_KEYS = (("cpu_cores", "cpu-cores"), ("cpu_mhz", "cpu-mhz"), ("gpu_mhz", "gpu-mhz"), ("emc_mhz", "emc-mhz"))


class PlannerError(RuntimeError):
    """The fleet planner could not plan a round (the service refused or was unreachable)."""


class DeviceQueryError(RuntimeError):
    """Too few nodes answered the device query within the strategy's ``query_timeout_s``."""


# ------------------------------------------------------------------------------------------------------
# Planners: in process or over HTTP, both with the /v1/fleet-plans and /v1/predictions shapes.
# ------------------------------------------------------------------------------------------------------

class FleetPlanner(Protocol):
    """What :class:`JetpredictStrategy` needs from a planner."""

    def plan(self, clients: Sequence[Mapping[str, str]], deadline_s: float, epochs: int) -> dict[str, Any]:
        """The ``POST /v1/fleet-plans`` answer for ``clients`` (``[{"id", "device"}]``)."""

    def predict(self, device: str, mode: Mapping[str, Any]) -> dict[str, Any]:
        """One ``POST /v1/predictions`` row: ``mode`` on ``device`` with its intervals."""


def _per_device(spec: Any, is_single: Callable[[Any], bool]) -> tuple[Any, dict[str, Any]]:
    """``(default, {device: value})`` from one value or a mapping device -> value (key ``"*"`` = default)."""
    if is_single(spec):
        return spec, {}
    if not isinstance(spec, Mapping) or not spec:
        raise InputError("give one workload, or a mapping of device id -> workload", "workload")
    table = dict(spec)
    default = table.pop("*", None)
    for device in table:
        load_device(device)  # UnknownDeviceError names the valid ids
    return default, table


def _no_model(client: Mapping[str, str]) -> dict[str, Any]:
    return {"id": client["id"], "device": client["device"], "meets_deadline": False,
            "reason": f"no workload model for device {client['device']!r}"}


def _merge_plans(parts: list[tuple[list[int], dict[str, Any]]], n: int) -> dict[str, Any]:
    """Plans of client subsets (positions, plan) -> one plan in the original client order."""
    out: list[dict[str, Any] | None] = [None] * n
    for positions, plan in parts:
        for pos, client in zip(positions, plan["clients"], strict=True):
            out[pos] = client
    clients = [c for c in out if c is not None]
    late = [c["id"] for c in clients if not c.get("meets_deadline")]
    total = math.fsum(float(c.get("energy_j") or 0.0) for c in clients if c.get("meets_deadline"))
    confidence = next((plan["confidence"] for _, plan in parts if plan.get("confidence") is not None), None)
    return {"feasible": not late, "total_energy_j": total, "confidence": confidence, "clients": clients,
            "infeasible_clients": late}


class LocalPlanner:
    """Plans in this process with :mod:`jetpredict.predictor.service` (no HTTP, no database).

    ``model``: a fitted workload model (``predictor.bundled.fit_workload``), the path of a model file
    written by ``jetpredict fit --out``, or a mapping device id -> either (clients of a device without
    an entry use key ``"*"`` when given; otherwise they are not planned). One model serves every device
    type through cross-device predictions; per-device models are better when each type was profiled.
    ``confidence``: coverage of the intervals, the deadline holding for their upper end (None = the
    service's default, 0.9).
    """

    def __init__(self, model: Any, confidence: float | None = None) -> None:
        from jetpredict.predictor.service import plan_fleet, predict

        self._plan_fleet, self._predict = plan_fleet, predict
        self.confidence = confidence
        default, table = _per_device(model, lambda m: not isinstance(m, Mapping))
        self._default = None if default is None else self._load(default)
        self._models = {device: self._load(m) for device, m in table.items()}

    @staticmethod
    def _load(model: Any) -> Any:
        if isinstance(model, str | Path):
            from jetpredict.predictor.bundled import load_model

            return load_model(model)
        return model

    def model_for(self, device: str) -> Any:
        """The workload model that plans clients of ``device`` (None when there is none)."""
        return self._models.get(device, self._default)

    def plan(self, clients: Sequence[Mapping[str, str]], deadline_s: float, epochs: int) -> dict[str, Any]:
        groups: dict[int, tuple[Any, list[int]]] = {}
        missing: list[int] = []
        for pos, client in enumerate(clients):
            model = self.model_for(client["device"])
            if model is None:
                missing.append(pos)
            else:
                groups.setdefault(id(model), (model, []))[1].append(pos)
        extra = {} if self.confidence is None else {"confidence": self.confidence}
        parts = [(positions, _as_dict(self._plan_fleet(model, [dict(clients[p]) for p in positions], deadline_s,
                                                       epochs=epochs, **extra)))
                 for model, positions in groups.values()]
        if missing:
            parts.append((missing, {"clients": [_no_model(clients[p]) for p in missing]}))
        return _merge_plans(parts, len(clients))

    def predict(self, device: str, mode: Mapping[str, Any]) -> dict[str, Any]:
        model = self.model_for(device)
        if model is None:
            raise PlannerError(f"no workload model for device {device!r}")
        extra = {} if self.confidence is None else {"confidence": self.confidence}
        table = self._predict(model, [dict(mode)], device, **extra)
        return {k: _plain(v) for k, v in table.iloc[0].to_dict().items()}


def _as_dict(plan: Any) -> dict[str, Any]:
    """A service fleet plan (a dataclass with ``as_dict``, or already the JSON-shaped dict) as a dict."""
    return plan.as_dict() if hasattr(plan, "as_dict") else dict(plan)


def _plain(value: Any) -> Any:
    """numpy scalars -> Python scalars (ConfigRecord and JSON take only those)."""
    item = getattr(value, "item", None)
    return item() if callable(item) else value


class HttpPlanner:
    """Plans through a running ``jetpredict serve``: ``POST /v1/fleet-plans`` and ``/v1/predictions``.

    ``workload``: a stored workload id, a workload object (``{"id": ...}`` or ``{"rows": [...]}``), or a
    mapping device id -> either (key ``"*"`` = the others). ``timeout_s``: per request, s. ``confidence``:
    as for :class:`LocalPlanner`.
    """

    def __init__(self, url: str, workload: Any, timeout_s: float = 30.0, confidence: float | None = None,
                 headers: Mapping[str, str] | None = None) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = float(timeout_s)
        self.confidence = confidence
        self.headers = {"Content-Type": "application/json", **(headers or {})}

        def single(w: Any) -> bool:
            return isinstance(w, str) or (isinstance(w, Mapping) and ("id" in w or "rows" in w))

        default, table = _per_device(workload, single)
        self._default = None if default is None else self._workload(default)
        self._workloads = {device: self._workload(w) for device, w in table.items()}

    @staticmethod
    def _workload(w: Any) -> dict[str, Any]:
        return {"id": w} if isinstance(w, str) else dict(w)

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(self.url + path, data=json.dumps(body).encode(), method="POST",
                                         headers=self.headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return json.loads(response.read().decode())
        except urllib.error.HTTPError as err:
            try:
                detail = json.loads(err.read().decode())
                message = f"{detail.get('message')} {detail.get('errors') or ''}".strip()
            except (ValueError, AttributeError):
                message = err.reason
            raise PlannerError(f"POST {self.url}{path} answered {err.code}: {message}") from None
        except (urllib.error.URLError, OSError, ValueError) as err:
            raise PlannerError(f"POST {self.url}{path} failed: {err}") from None

    def plan(self, clients: Sequence[Mapping[str, str]], deadline_s: float, epochs: int) -> dict[str, Any]:
        groups: dict[str, tuple[dict[str, Any], list[int]]] = {}
        missing: list[int] = []
        for pos, client in enumerate(clients):
            workload = self._workloads.get(client["device"], self._default)
            if workload is None:
                missing.append(pos)
            else:
                groups.setdefault(json.dumps(workload, sort_keys=True), (workload, []))[1].append(pos)
        parts = []
        for workload, positions in groups.values():
            body = {"workload": workload, "deadline_s": deadline_s, "epochs": epochs,
                    "clients": [{"id": clients[p]["id"], "device": clients[p]["device"]} for p in positions]}
            if self.confidence is not None:
                body["confidence"] = self.confidence
            parts.append((positions, self._post("/v1/fleet-plans", body)))
        if missing:
            parts.append((missing, {"clients": [_no_model(clients[p]) for p in missing]}))
        return _merge_plans(parts, len(clients))

    def predict(self, device: str, mode: Mapping[str, Any]) -> dict[str, Any]:
        workload = self._workloads.get(device, self._default)
        if workload is None:
            raise PlannerError(f"no workload for device {device!r}")
        answer = self._post("/v1/predictions", {"device": device, "workload": workload, "modes": [dict(mode)]})
        return dict(answer["predictions"][0])


# ------------------------------------------------------------------------------------------------------
# Plans of one round, per node
# ------------------------------------------------------------------------------------------------------

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
    deadline holds for ``time_s_high``). ``None`` = the planner gave no such figure."""

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

    def power_mode(self) -> PowerMode | None:
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
            for name, key in _MODE_KEYS:
                if kwargs.get(name) is None:
                    raise InputError(f"{PLAN_RECORD} names a mode but has no {key!r}", f"{PLAN_RECORD}.{key}")
        return cls(**kwargs)


def _f(value: Any) -> float | None:
    return None if value is None else float(value)


def _scaled(value: Any, factor: float) -> float | None:
    return None if value is None else float(value) * factor


def plan_nodes(planner: FleetPlanner, nodes: Iterable[NodeInfo], deadline_s: float, epochs: int,
               prediction_cache: dict[tuple, dict[str, Any]] | None = None) -> dict[int, ClientPlan]:
    """One :class:`ClientPlan` per node with a known device (see the module docstring for the rule).

    Nodes are planned in groups of equal epoch scale ``s`` under deadline ``deadline_s / s``; the
    intervals come from one prediction per (device, mode), kept in ``prediction_cache``.
    """
    cache = {} if prediction_cache is None else prediction_cache
    by_scale: dict[float, list[NodeInfo]] = {}
    for node in nodes:
        if node.device is not None:
            by_scale.setdefault(float(node.epoch_scale), []).append(node)
    plans: dict[int, ClientPlan] = {}
    for scale, group in by_scale.items():
        answer = planner.plan([{"id": str(n.node_id), "device": str(n.device)} for n in group],
                              deadline_s / scale, epochs)
        by_id = {str(c["id"]): c for c in answer["clients"]}
        for node in group:
            plans[node.node_id] = _client_plan(planner, node, by_id[str(node.node_id)], scale, deadline_s,
                                               epochs, cache)
            plans[node.node_id].confidence = _f(answer.get("confidence"))
    return plans


def _client_plan(planner: FleetPlanner, node: NodeInfo, c: Mapping[str, Any], scale: float, deadline_s: float,
                 epochs: int, cache: dict[tuple, dict[str, Any]]) -> ClientPlan:
    plan = ClientPlan(node_id=node.node_id, device=str(node.device), epoch_scale=scale, epochs=epochs,
                      deadline_s=deadline_s, meets_deadline=bool(c.get("meets_deadline")), reason=c.get("reason"))
    if c.get("mode") is None:
        return plan
    knobs = {"mode": str(c["mode"]), "cpu_cores": int(c["cpu_cores"]), "cpu_mhz": float(c["cpu_mhz"]),
             "gpu_mhz": float(c["gpu_mhz"]), "emc_mhz": float(c["emc_mhz"])}
    key = (plan.device, knobs["cpu_cores"], knobs["cpu_mhz"], knobs["gpu_mhz"], knobs["emc_mhz"])
    if key not in cache:
        cache[key] = planner.predict(plan.device, knobs)
    row = cache[key]
    work = epochs * scale  # profiled epochs of local training this round
    plan.mode, plan.cpu_cores, plan.cpu_mhz = knobs["mode"], knobs["cpu_cores"], knobs["cpu_mhz"]
    plan.gpu_mhz, plan.emc_mhz = knobs["gpu_mhz"], knobs["emc_mhz"]
    plan.time_s = _scaled(c.get("round_time_s"), scale) or _scaled(row.get("epoch_time_s"), work)
    plan.time_s_low = _scaled(row.get("epoch_time_s_low"), work)
    plan.time_s_high = _scaled(c.get("round_time_s_high"), scale) or _scaled(row.get("epoch_time_s_high"), work)
    plan.energy_j = _scaled(c.get("train_energy_j"), scale) or _scaled(row.get("epoch_energy_j"), work)
    plan.energy_j_low = _scaled(row.get("epoch_energy_j_low"), work)
    plan.energy_j_high = _scaled(row.get("epoch_energy_j_high"), work)
    # Planned under D/s, idle is base x (D/s - epochs x T); times s it is base x (D - s x epochs x T), the
    # node's own idle time until the deadline.
    plan.idle_energy_j = _scaled(c.get("idle_energy_j"), scale)
    plan.avg_power_w = _f(c.get("avg_power_w", row.get("avg_power_w")))
    plan.avg_power_w_low = _f(c.get("avg_power_w_low", row.get("avg_power_w_low")))
    plan.avg_power_w_high = _f(c.get("avg_power_w_high", row.get("avg_power_w_high")))
    plan.cross_device = bool(c.get("cross_device", row.get("cross_device", False)))
    plan.power_source = c.get("power_source", row.get("power_source"))
    if plan.power_source is not None:
        plan.power_source = str(plan.power_source)
    return plan


# ------------------------------------------------------------------------------------------------------
# Server side: the strategy wrapper
# ------------------------------------------------------------------------------------------------------

@dataclass
class ClientRecord:
    """One node in one round: its plan (``pred_*``), whether it trained, and what it reported.

    Times in s, energies in J (training of the round's local epochs), power in W. ``reported_energy_j``
    is None when the node had no power meter (``energy_null_reason`` says why); ``source`` is
    ``measured`` or ``simulated`` (digital twin). ``deadline_missed``: reported time above the deadline,
    or no reply from a selected node.
    """

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
    reported_time_s: float | None = None
    reported_energy_j: float | None = None
    energy_null_reason: str | None = None
    reported_avg_power_w: float | None = None
    reported_base_power_w: float | None = None
    source: str | None = None
    mode_applied: bool | None = None
    deadline_missed: bool | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class _NodeSubsetGrid(Grid):
    """A Grid that shows the wrapped strategy only the planned nodes; everything else is the real grid's."""

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


def read_report(reply: Message) -> dict[str, Any] | None:
    """The ``jetpredict.report`` of a reply as a dict (None when the reply carries none)."""
    if reply.has_error() or REPORT_RECORD not in reply.content.config_records:
        return None
    return dict(reply.content.config_records[REPORT_RECORD])


class JetpredictStrategy(Strategy):
    """Wraps a Flower strategy: trains only nodes whose planned mode meets the round deadline, and tells
    each one its mode and predicted time, energy and power (see the module docstring).

    ``planner``: a :class:`LocalPlanner`, :class:`HttpPlanner`, or a fitted model / model path / mapping
    device -> model (made into a LocalPlanner). ``deadline_s``: the round deadline for the local
    training (s). ``local_epochs``: local epochs per round (also sent to the nodes as ``epochs``).
    ``cheapest_fraction``: keep only this share (0, 1] of the nodes that meet the deadline, those of least
    planned energy (training + idle until the deadline) per unit of local work. ``query_timeout_s``: how
    long the device query waits for replies (s). It must hear from at least the wrapped strategy's
    ``min_available_nodes``, or it raises :class:`DeviceQueryError` (a round planned on fewer nodes would
    train a different federation than asked for); further nodes that do not answer are asked again the
    next round.
    """

    def __init__(self, strategy: Strategy, planner: Any, deadline_s: float, local_epochs: int = 1,
                 cheapest_fraction: float | None = None, query_timeout_s: float = 60.0) -> None:
        if not isinstance(strategy, Strategy):
            raise InputError("strategy must be a Flower Message-API Strategy (flwr.serverapp.strategy)",
                             "strategy")
        deadline = float(deadline_s)
        if not math.isfinite(deadline) or deadline <= 0:
            raise InputError(f"deadline_s must be a finite number of seconds > 0, got {deadline_s!r}",
                             "deadline_s")
        if isinstance(local_epochs, bool) or not isinstance(local_epochs, int) or local_epochs < 1:
            raise InputError(f"local_epochs must be a whole number >= 1, got {local_epochs!r}", "local_epochs")
        if cheapest_fraction is not None and not 0 < float(cheapest_fraction) <= 1:
            raise InputError(f"cheapest_fraction must be in (0, 1], got {cheapest_fraction!r}",
                             "cheapest_fraction")
        self.inner = strategy
        self.planner: FleetPlanner = planner if hasattr(planner, "plan") and hasattr(planner, "predict") \
            else LocalPlanner(planner)
        self.deadline_s = deadline
        self.local_epochs = local_epochs
        self.cheapest_fraction = None if cheapest_fraction is None else float(cheapest_fraction)
        self.query_timeout_s = checked_number(query_timeout_s, "query_timeout_s")
        #: Every (round, node) record, in order; see :class:`ClientRecord`.
        self.records: list[ClientRecord] = []
        self._nodes: dict[int, NodeInfo] = {}
        self._predictions: dict[tuple, dict[str, Any]] = {}
        self._round_records: dict[int, dict[int, ClientRecord]] = {}

    # -- what the wrapped strategy needs ---------------------------------------------------------------
    def _min_train_nodes(self) -> int:
        return int(getattr(self.inner, "min_train_nodes", 0) or 0)

    def _inner_configure_train(self, server_round: int, arrays: Any, config: ConfigRecord, grid: Grid,
                               node_ids: list[int]) -> list[Message]:
        """The wrapped strategy's messages when it may only sample ``node_ids``.

        Its ``min_available_nodes`` counts connected nodes, which :meth:`_discover` already waited for; on
        the subset grid it would wait forever for nodes that were planned out, so it is capped at the
        subset's size during the call.
        """
        subset = _NodeSubsetGrid(grid, node_ids)
        if not hasattr(self.inner, "min_available_nodes"):
            return list(self.inner.configure_train(server_round, arrays, config, subset))
        before = self.inner.min_available_nodes
        self.inner.min_available_nodes = min(int(before or 0), len(node_ids))
        try:
            return list(self.inner.configure_train(server_round, arrays, config, subset))
        finally:
            self.inner.min_available_nodes = before

    def summary(self) -> None:
        log.info("JetpredictStrategy: deadline %.4g s, %d local epoch(s), planner %s, cheapest fraction %s",
                 self.deadline_s, self.local_epochs, type(self.planner).__name__, self.cheapest_fraction)
        self.inner.summary()

    # -- device discovery -------------------------------------------------------------------------------
    def _discover(self, grid: Grid) -> dict[int, NodeInfo]:
        need = max(1, int(getattr(self.inner, "min_available_nodes", 1) or 1))
        while len(node_ids := list(grid.get_node_ids())) < need:
            log.info("JetpredictStrategy: waiting for nodes (%d connected, %d required)", len(node_ids), need)
            time.sleep(1.0)
        unknown = [n for n in node_ids if n not in self._nodes]
        answers: dict[int, NodeInfo] = {}
        if unknown:
            query = RecordDict({"config": ConfigRecord({"keys": [DEVICE_KEY, EPOCH_SCALE_KEY]})})
            messages = [Message(content=query, dst_node_id=n, message_type=QUERY_TYPE) for n in unknown]
            t0 = time.monotonic()
            for reply in grid.send_and_receive(messages, timeout=self.query_timeout_s):
                node = reply.metadata.src_node_id
                answers[node] = _node_info(node, reply)
                if answers[node].device is not None:
                    self._nodes[node] = answers[node]
            heard = sum(n in self._nodes or n in answers for n in node_ids)
            if heard < need:
                # Planning on whoever answered would silently train a smaller federation (or nobody).
                raise DeviceQueryError(
                    f"device query: {heard} of the {need} nodes needed (min_available_nodes; {len(node_ids)} "
                    f"connected) answered within query_timeout_s={self.query_timeout_s:g} s "
                    f"(waited {time.monotonic() - t0:.1f} s); raise query_timeout_s or check the SuperNodes")
            if len(answers) < len(unknown):
                log.warning("JetpredictStrategy: %d node(s) did not answer the device query within %g s; "
                            "asked again next round", len(unknown) - len(answers), self.query_timeout_s)
        return {n: self._nodes.get(n) or answers.get(n) or NodeInfo(n, None, reason="no reply to the device query")
                for n in node_ids}

    # -- training rounds --------------------------------------------------------------------------------
    def configure_train(self, server_round: int, arrays: Any, config: ConfigRecord, grid: Grid
                        ) -> Iterable[Message]:
        """Plan the round, let the wrapped strategy sample among the nodes that meet the deadline, and add
        each node's plan to its message."""
        nodes = self._discover(grid)
        try:
            plans = plan_nodes(self.planner, nodes.values(), self.deadline_s, self.local_epochs, self._predictions)
        except PlannerError as err:
            # No plan, no training: an unplanned round could straggle past the deadline. Retried next round.
            log.error("JetpredictStrategy: round %d skipped: %s", server_round, err)
            records = {n: self._record(server_round, info, None) for n, info in nodes.items()}
            for record in records.values():
                record.reason = record.reason or f"round skipped: the planner failed: {err}"
            self._round_records[server_round] = records
            self.records.extend(records.values())
            return []
        eligible = [n for n in nodes if n in plans and plans[n].meets_deadline]
        if self.cheapest_fraction is not None and eligible:
            def cost(n: int) -> float:
                p = plans[n]
                return ((p.energy_j or 0.0) + (p.idle_energy_j or 0.0)) / p.epoch_scale
            keep = max(1, math.ceil(self.cheapest_fraction * len(eligible)))
            eligible = sorted(eligible, key=cost)[:keep]
        records = {n: self._record(server_round, info, plans.get(n)) for n, info in nodes.items()}
        self._round_records[server_round] = records
        need = max(1, self._min_train_nodes())
        if len(eligible) < need:
            log.warning("JetpredictStrategy: round %d skipped: %d node(s) meet the %.4g s deadline, the wrapped "
                        "strategy trains at least %d", server_round, len(eligible), self.deadline_s, need)
            for record in records.values():
                record.reason = record.reason or f"round skipped: only {len(eligible)} node(s) meet the deadline"
            self.records.extend(records.values())
            return []
        chosen = set(eligible)
        for n, record in records.items():
            if n in plans and plans[n].meets_deadline and n not in chosen:
                record.reason = "not among the cheapest fraction"
        messages = self._inner_configure_train(server_round, arrays, config, grid, eligible)
        for message in messages:
            node = message.metadata.dst_node_id
            plan = plans.get(node)
            if plan is None:  # pragma: no cover - the subset grid only offers planned nodes
                continue
            content = dict(message.content.items())
            content[PLAN_RECORD] = plan.to_config()
            message.content = RecordDict(content)
            records[node].selected = True
        for n, record in records.items():
            if not record.selected and record.reason is None and n in chosen:
                record.reason = "not sampled by the wrapped strategy"
        self.records.extend(records.values())
        return messages

    def _record(self, server_round: int, info: NodeInfo, plan: ClientPlan | None) -> ClientRecord:
        record = ClientRecord(round=server_round, node_id=info.node_id, device=info.device,
                              epoch_scale=info.epoch_scale if info.device else None, selected=False,
                              reason=info.reason)
        if plan is not None:
            record.reason = None if plan.meets_deadline else (plan.reason or "cannot meet the deadline")
            record.mode = plan.mode
            record.pred_time_s, record.pred_time_s_low, record.pred_time_s_high = (
                plan.time_s, plan.time_s_low, plan.time_s_high)
            record.pred_energy_j, record.pred_energy_j_low, record.pred_energy_j_high = (
                plan.energy_j, plan.energy_j_low, plan.energy_j_high)
            record.pred_avg_power_w = plan.avg_power_w
        return record

    def aggregate_train(self, server_round: int, replies: Iterable[Message]) -> tuple[Any, MetricRecord | None]:
        """Record each node's report, hide the ``jetpredict-*`` metrics from the wrapped strategy, and add
        the round's totals to the aggregated metrics."""
        replies = list(replies)
        records = self._round_records.get(server_round, {})
        for reply in replies:
            node = reply.metadata.src_node_id
            record = records.get(node)
            if not reply.has_error():
                for metrics in reply.content.metric_records.values():
                    for key in [k for k in metrics if k.startswith(METRIC_PREFIX)]:
                        del metrics[key]
            if record is None:
                continue
            record.replied = not reply.has_error()
            report = read_report(reply)
            if report is not None:
                record.reported_time_s = _f(report.get("time-s"))
                record.reported_energy_j = _f(report.get("energy-j"))
                record.energy_null_reason = report.get("energy-null-reason")
                record.reported_avg_power_w = _f(report.get("avg-power-w"))
                record.reported_base_power_w = _f(report.get("base-power-w"))
                record.source = report.get("source")
                record.mode_applied = report.get("mode-applied")
        for record in records.values():
            if record.selected:
                record.deadline_missed = (not record.replied or record.reported_time_s is None
                                          or record.reported_time_s > self.deadline_s)
        arrays, metrics = self.inner.aggregate_train(server_round, replies)
        totals = self.round_totals(server_round)
        if totals:
            metrics = MetricRecord() if metrics is None else metrics
            for key, value in totals.items():
                metrics[key] = value
        return arrays, metrics

    def round_totals(self, server_round: int) -> dict[str, float]:
        """The round's figures: nodes selected and excluded, deadline misses, longest reported time (s),
        reported and predicted training energy of the nodes that reported energy (J)."""
        records = self._round_records.get(server_round, {})
        selected = [r for r in records.values() if r.selected]
        if not records:
            return {}
        with_energy = [r for r in selected if r.reported_energy_j is not None]
        out: dict[str, float] = {
            "jetpredict-selected": len(selected), "jetpredict-excluded": len(records) - len(selected),
            "jetpredict-deadline-misses": sum(bool(r.deadline_missed) for r in selected),
        }
        times = [r.reported_time_s for r in selected if r.reported_time_s is not None]
        if times:
            out["jetpredict-round-time-s"] = max(times)
        if with_energy:
            out["jetpredict-energy-j"] = math.fsum(r.reported_energy_j for r in with_energy)
            predicted = [r.pred_energy_j for r in with_energy if r.pred_energy_j is not None]
            if len(predicted) == len(with_energy):
                out["jetpredict-pred-energy-j"] = math.fsum(predicted)
        return out

    # -- evaluation: the wrapped strategy's, unchanged --------------------------------------------------
    def configure_evaluate(self, server_round: int, arrays: Any, config: ConfigRecord, grid: Grid
                           ) -> Iterable[Message]:
        return self.inner.configure_evaluate(server_round, arrays, config, grid)

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]) -> MetricRecord | None:
        return self.inner.aggregate_evaluate(server_round, replies)


def _node_info(node: int, reply: Message) -> NodeInfo:
    """Parse a node's answer to the device query (an unusable answer gives a NodeInfo with a reason)."""
    if reply.has_error():
        return NodeInfo(node, None, reason=f"device query failed: {reply.error.reason}")
    record = reply.content.config_records.get(NODE_RECORD)
    if record is None:
        return NodeInfo(node, None, reason=f"the reply to the device query has no {NODE_RECORD} record")
    device = record.get("device")
    if not device:
        return NodeInfo(node, None, reason=str(record.get("reason") or f"node config has no {DEVICE_KEY}"))
    try:
        load_device(str(device))
        scale = _epoch_scale(record.get("epoch-scale", 1.0))
    except InputError as err:
        return NodeInfo(node, None, reason=f"node {node}: {err.message}")
    return NodeInfo(node, str(device), scale)


def _epoch_scale(value: Any) -> float:
    return checked_number(value, EPOCH_SCALE_KEY)


# ------------------------------------------------------------------------------------------------------
# Client side
# ------------------------------------------------------------------------------------------------------

NodeValue = Any  # a value, or a callable taking the Flower Context and returning it


def _resolve(value: NodeValue, context: Context | None, key: str) -> Any:
    if callable(value):
        return value(context)
    if value is not None:
        return value
    if context is not None:
        return context.node_config.get(key)
    return None


def add_device_query(app: Any, device: NodeValue = None, epoch_scale: NodeValue = None) -> None:
    """Register on ``app`` (a ``flwr.clientapp.ClientApp``) the answer to the strategy's device query.

    ``device`` / ``epoch_scale``: a value, or a callable ``(context) -> value``; by default the node config
    keys ``jetpredict-device`` and ``jetpredict-epoch-scale`` (1.0 when absent). In simulation, where
    every node shares one node config, pass callables of ``context.node_config["partition-id"]``.
    """

    @app.query(QUERY_ACTION)
    def _jetpredict_device_query(message: Message, context: Context) -> Message:
        dev = _resolve(device, context, DEVICE_KEY)
        record: dict[str, Any] = {"device": str(dev) if dev else ""}
        if not dev:
            record["reason"] = f"node config has no {DEVICE_KEY}"
        scale = _resolve(epoch_scale, context, EPOCH_SCALE_KEY)
        # Sent as given; the strategy checks it and names the key when it is not a positive number.
        record["epoch-scale"] = 1.0 if scale is None else scale if isinstance(scale, int | float) else str(scale)
        return Message(RecordDict({NODE_RECORD: ConfigRecord(record)}), reply_to=message)


def read_plan(message: Message) -> ClientPlan | None:
    """The plan the strategy put into a train message (None when it carries none)."""
    record = message.content.config_records.get(PLAN_RECORD)
    if record is None:
        return None
    return ClientPlan.from_config(record, node_id=message.metadata.dst_node_id)


@dataclass(frozen=True)
class TwinWorkload:
    """Simulation: the round's time and energy come from the digital twin (``profiler.sim``).

    ``workload``: a workload the twin knows (``lenet5-mnist``, ``resnet18-cifar10``, ...).
    ``epoch_scale``: one local epoch of this node in epochs of that workload (its share of the dataset).
    ``epochs``: local epochs of the round (default: the plan's, else 1). ``default_mode``: the preset the
    device runs when the message carries no plan (a plain Flower strategy); None = its fastest preset
    (MAXN, whatever the board calls it). ``batch_size``: None = the workload's.
    """

    workload: str
    epoch_scale: float = 1.0
    epochs: int | None = None
    default_mode: str | None = None
    batch_size: int | None = None


@lru_cache(maxsize=32)
def _twin(device: str, workload: str) -> Any:
    from jetpredict.profiler.sim import workload_complexity
    from jetpredict.profiler.sim.physics import DevicePhysics
    from jetpredict.profiler.sim.twin import Twin

    return Twin(DevicePhysics(load_device(device)), workload_complexity(workload))


def twin_round(device: str, mode: PowerMode, spec: TwinWorkload, epochs: int) -> dict[str, float]:
    """The twin's figures of one round on ``device`` at ``mode`` (noise-free means; simulated):
    ``time_s`` and ``energy_j`` of ``epochs`` x ``spec.epoch_scale`` epochs, ``avg_power_w`` and the
    mode's idle ``base_power_w``."""
    load_device(device).validate_mode(*mode.knobs())
    e = _twin(device, spec.workload).epoch(mode, spec.batch_size)
    work = epochs * float(spec.epoch_scale)
    return {"time_s": float(e["epoch_time_s"][0]) * work, "energy_j": float(e["epoch_energy_j"][0]) * work,
            "avg_power_w": float(e["avg_power_w"][0]), "base_power_w": float(e["base_power_w"][0])}


class PlannedRound:
    """Context manager of a ClientApp train function: run the round at its planned power mode, measure it.

    On a Jetson (no ``twin``): enters the power-mode controller (``controller``, default
    ``detect_controller("jetson", device)``), applies the planned mode, samples the power meter (``meter``,
    default ``detect_power_meter(device)``) during the block, and restores the previous mode on every exit
    path: normal end, exception, and SIGINT/SIGTERM (handlers installed when entered from the main thread;
    see :class:`~jetpredict.profiler.powermode.PowerModeController`). A message without a plan trains at
    the mode in force. Energy is None with ``energy_null_reason`` when there is no meter or no usable
    samples, never 0. With ``twin``: nothing is switched or measured; :attr:`report` holds the twin's
    time and energy for the planned device and mode (``source = "simulated"``).

    ``device``: catalogue id, a callable of the Context, or None for node config ``jetpredict-device``
    (the plan's device wins when there is a plan).
    """

    def __init__(self, message: Message, context: Context | None = None, *, device: NodeValue = None,
                 controller: Any = None, meter: Any = None, twin: TwinWorkload | None = None,
                 sampler_hz: float = 10.0) -> None:
        self.plan = read_plan(message)
        self.server_round = int(message.content.config_records["config"].get("server-round", 0)) \
            if "config" in message.content.config_records else 0
        node_device = _resolve(device, context, DEVICE_KEY)
        self.device: str | None = self.plan.device if self.plan is not None else (
            str(node_device) if node_device else None)
        self.twin = twin
        self.controller = controller
        self.meter = meter
        self.sampler_hz = sampler_hz
        self.report: dict[str, Any] = {}
        self._sampler: Any = None
        self._entered_controller = False
        self._own_meter = False  # close only a meter this round opened (a caller's may be reused)
        self._t0 = 0.0

    def _mode(self) -> PowerMode | None:
        if self.plan is not None:
            return self.plan.power_mode()
        if self.twin is not None and self.device is not None:
            device = load_device(self.device)
            return device.maxn if self.twin.default_mode is None else device.preset(self.twin.default_mode)
        return None

    def __enter__(self) -> PlannedRound:
        mode = self._mode()
        self.report = {"device": self.device or "", "mode": mode.mode if mode else "", "mode-applied": False}
        if self.twin is not None:
            if self.device is None:
                raise InputError(f"the twin needs the device: no plan and no {DEVICE_KEY}", DEVICE_KEY)
            self._t0 = time.perf_counter()
            return self
        if mode is not None:
            if self.controller is None:
                from jetpredict.profiler.powermode import detect_controller

                self.controller = detect_controller("jetson", self.device)
            self.controller.__enter__()
            self._entered_controller = True
            try:
                self.controller.apply(mode)
            except BaseException:
                self._leave_controller()
                raise
            self.report["mode-applied"] = True
        if self.meter is None:
            from jetpredict.profiler.power import detect_power_meter

            self.meter = detect_power_meter(self.device)
            self._own_meter = True
        if self.meter.available:
            from jetpredict.profiler.power import PowerSampler

            self._sampler = PowerSampler(self.meter, self.sampler_hz).start()
        self._t0 = time.perf_counter()
        return self

    def _leave_controller(self) -> None:
        if self._entered_controller:
            self._entered_controller = False
            self.controller.__exit__(None, None, None)

    def __exit__(self, *exc: object) -> None:
        t1 = time.perf_counter()
        try:
            self.report["wall-time-s"] = t1 - self._t0
            if self.twin is not None:
                self._simulated()
            else:
                self._measured(t1)
        finally:
            self._leave_controller()  # restore the previous mode even when measuring failed

    def _simulated(self) -> None:
        mode = self._mode()
        epochs = self.twin.epochs or (self.plan.epochs if self.plan is not None else 1)
        figures = twin_round(str(self.device), mode, self.twin, epochs)
        self.report.update({"source": "simulated", "meter": f"sim:{self.device}", "time-s": figures["time_s"],
                            "energy-j": figures["energy_j"], "avg-power-w": figures["avg_power_w"],
                            "base-power-w": figures["base_power_w"], "mode-applied": True,
                            "twin-workload": self.twin.workload, "epochs": epochs,
                            "epoch-scale": float(self.twin.epoch_scale)})

    def _measured(self, t1: float) -> None:
        self.report.update({"source": "measured", "time-s": t1 - self._t0, "meter": self.meter.name})
        if self._sampler is None:
            self.report["energy-null-reason"] = f"no power meter ({self.meter.name})"
            return
        try:
            trace = self._sampler.stop()
        finally:
            if self._own_meter:
                self.meter.close()
        energy = trace.energy_j(self._t0, t1)
        if energy is None:
            why = trace.last_error or "too few power samples in the round"
            self.report["energy-null-reason"] = f"{self.meter.name}: {why}"
        else:
            self.report["energy-j"] = energy
            self.report["avg-power-w"] = energy / (t1 - self._t0)

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


__all__ = [
    "DEVICE_KEY",
    "DeviceQueryError",
    "EPOCH_SCALE_KEY",
    "PLAN_RECORD",
    "REPORT_RECORD",
    "ClientPlan",
    "ClientRecord",
    "FleetPlanner",
    "HttpPlanner",
    "JetpredictStrategy",
    "LocalPlanner",
    "NodeInfo",
    "PlannedRound",
    "PlannerError",
    "TwinWorkload",
    "add_device_query",
    "plan_nodes",
    "read_plan",
    "read_report",
    "twin_round",
]
