"""Flower integration: pick the clients and power modes of each federated round from jetpredict fleet plans.

Server side (:mod:`.strategy`): :class:`JetpredictStrategy` wraps any Flower strategy of the Message API;
each round it learns every new node's Jetson type, plans the round under the deadline with a fleet
planner (:mod:`.planners`: :class:`LocalPlanner` in process, :class:`HttpPlanner` through a running
``jetpredict serve``), lets the wrapped strategy sample among the nodes whose plan meets the deadline,
and sends each one its plan (:mod:`.plans`). Client side (:mod:`.client`): one mod,
``ClientApp(mods=[jetpredict_mod()])``, answers the device query and runs each train message at its
planned mode, measured (or costed by the digital twin, :mod:`.twin`), the figures attached to the reply.
:mod:`.wire` holds the keys both sides share.

Needs the ``[flower]`` extra: ``pip install 'jetpredict[flower]'``.
"""

from __future__ import annotations

try:
    import flwr  # noqa: F401
    from flwr.app import Message  # noqa: F401  (the Message API, flwr >= 1.42)
except ImportError as _missing:  # pragma: no cover - exercised by a subprocess test without Flower
    raise ImportError(
        "jetpredict.integrations.flower needs Flower (flwr >= 1.42, Message API), which is not installed: "
        "pip install 'jetpredict[flower]'") from _missing

from jetpredict.integrations.flower.client import (
    JetpredictMod,
    PlannedRound,
    add_device_query,
    jetpredict_mod,
)
from jetpredict.integrations.flower.planners import (
    PROVENANCE_KEYS,
    FleetPlanner,
    HttpPlanner,
    LocalPlanner,
    PlannerError,
    provenance_of,
    summarize_provenance,
)
from jetpredict.integrations.flower.plans import ClientPlan, NodeInfo, PlanProvenance, plan_nodes, read_plan
from jetpredict.integrations.flower.strategy import (
    DEFAULT_NODE_WAIT_S,
    ClientRecord,
    DeviceQueryError,
    JetpredictStrategy,
    PlannedNodesGrid,
)
from jetpredict.integrations.flower.twin import FASTEST_PRESET, TwinWorkload, preset_mode, twin_round
from jetpredict.integrations.flower.wire import (
    DEVICE_KEY,
    ENERGY_METRIC,
    ENERGY_REPORTED_METRIC,
    EPOCH_SCALE_KEY,
    EXCLUDED_METRIC,
    FAILED_METRIC,
    METRIC_PREFIX,
    MISSES_METRIC,
    NODE_RECORD,
    PLAN_RECORD,
    POWER_METRIC,
    PRED_ENERGY_METRIC,
    QUERY_ACTION,
    QUERY_RECORD,
    QUERY_TYPE,
    REPORT_RECORD,
    ROUND_TIME_METRIC,
    SELECTED_METRIC,
    SIMULATED_METRIC,
    TIME_METRIC,
    read_report,
    strip_metrics,
)

__all__ = [
    "DEFAULT_NODE_WAIT_S",
    "DEVICE_KEY",
    "ENERGY_METRIC",
    "ENERGY_REPORTED_METRIC",
    "EPOCH_SCALE_KEY",
    "EXCLUDED_METRIC",
    "FAILED_METRIC",
    "FASTEST_PRESET",
    "METRIC_PREFIX",
    "MISSES_METRIC",
    "NODE_RECORD",
    "PLAN_RECORD",
    "POWER_METRIC",
    "PRED_ENERGY_METRIC",
    "PROVENANCE_KEYS",
    "QUERY_ACTION",
    "QUERY_RECORD",
    "QUERY_TYPE",
    "REPORT_RECORD",
    "ROUND_TIME_METRIC",
    "SELECTED_METRIC",
    "SIMULATED_METRIC",
    "TIME_METRIC",
    "ClientPlan",
    "ClientRecord",
    "DeviceQueryError",
    "FleetPlanner",
    "HttpPlanner",
    "JetpredictMod",
    "JetpredictStrategy",
    "LocalPlanner",
    "NodeInfo",
    "PlanProvenance",
    "PlannedNodesGrid",
    "PlannedRound",
    "PlannerError",
    "TwinWorkload",
    "add_device_query",
    "jetpredict_mod",
    "plan_nodes",
    "preset_mode",
    "provenance_of",
    "read_plan",
    "read_report",
    "strip_metrics",
    "summarize_provenance",
    "twin_round",
]
