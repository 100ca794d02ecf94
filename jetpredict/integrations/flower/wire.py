"""What travels between the strategy and the nodes: node-config keys, message types, record and metric keys.

Server to node: a device query (``query.jetpredict``, or a ``train`` message holding only a
``jetpredict.query`` record for apps whose only jetpredict part is the mod), and in each train message
the node's plan (``jetpredict.plan`` ConfigRecord, :class:`~.plans.ClientPlan`). Node to server: the
device answer (``jetpredict.node``), and in each train reply the ``jetpredict-*`` metrics plus the full
report (``jetpredict.report`` ConfigRecord). Keys are kebab-case, as Flower's own config keys are.
"""

from __future__ import annotations

from typing import Any

from flwr.app import Message

from jetpredict.models.catalogue import MODE_FIELDS

#: Node config keys (``flower-supernode --node-config 'jetpredict-device="nano"'``).
DEVICE_KEY = "jetpredict-device"
EPOCH_SCALE_KEY = "jetpredict-epoch-scale"
#: Message type of the device query (``ClientApp.query("jetpredict")`` answers it).
QUERY_ACTION = "jetpredict"
QUERY_TYPE = f"query.{QUERY_ACTION}"
#: RecordDict keys: the query carried by a train message, the node's answer, the plan in a train message,
#: the report in a reply.
QUERY_RECORD = "jetpredict.query"
NODE_RECORD = "jetpredict.node"
PLAN_RECORD = "jetpredict.plan"
REPORT_RECORD = "jetpredict.report"
#: Prefix of the metrics a client adds to its reply's MetricRecord.
METRIC_PREFIX = "jetpredict-"
#: Reported time (s), energy (J) and mean power (W); energy and power are absent when unknown
#: (MetricRecord has no null; the report says why). ``jetpredict-simulated``: 1.0 for twin figures.
TIME_METRIC = "jetpredict-time-s"
ENERGY_METRIC = "jetpredict-energy-j"
POWER_METRIC = "jetpredict-avg-power-w"
SIMULATED_METRIC = "jetpredict-simulated"
#: Round totals the strategy adds to the aggregated train metrics: nodes selected and excluded, deadline
#: misses (a selected node late, or silent), failures (a selected node whose training raised: an error reply,
#: not a miss), the longest reported time (s), and the reported and predicted training energy (J) of the nodes
#: that replied (``ENERGY_METRIC``: absent unless every one of them reported energy, never a partial sum),
#: with the count of those that did report energy.
SELECTED_METRIC = "jetpredict-selected"
EXCLUDED_METRIC = "jetpredict-excluded"
MISSES_METRIC = "jetpredict-deadline-misses"
FAILED_METRIC = "jetpredict-failed"
ROUND_TIME_METRIC = "jetpredict-round-time-s"
PRED_ENERGY_METRIC = "jetpredict-pred-energy-j"
ENERGY_REPORTED_METRIC = "jetpredict-energy-reported"
#: Mode fields carried in a plan, with their ConfigRecord keys (the field's name, dashed).
MODE_KEYS: tuple[tuple[str, str], ...] = tuple((name, name.replace("_", "-")) for name in MODE_FIELDS)


def read_report(reply: Message) -> dict[str, Any] | None:
    """The ``jetpredict.report`` of a reply as a dict (None when the reply carries none)."""
    if reply.has_error() or REPORT_RECORD not in reply.content.config_records:
        return None
    return dict(reply.content.config_records[REPORT_RECORD])


def strip_metrics(reply: Message) -> None:
    """Remove the ``jetpredict-*`` metrics from a reply, so that a strategy's averages never see them
    (nodes without a power meter report no energy, so the keys differ between nodes)."""
    if reply.has_error():
        return
    for metrics in reply.content.metric_records.values():
        for key in [k for k in metrics if k.startswith(METRIC_PREFIX)]:
            del metrics[key]


def as_float(value: Any) -> float | None:
    """``value`` as a float, None staying None."""
    return None if value is None else float(value)
