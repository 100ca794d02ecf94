"""The server side of the Flower fleet example: the planner's models, the four arms, and their accounting.

Arms, all FedAvg on the same nodes, data, deadline, local epochs and twin (see ``README.md``):

- ``maxn``: Flower's ``FedAvg`` as it comes; every Jetson trains at its fastest preset (MAXN or the
  board's equivalent) and the server waits for every client, late or not;
- ``maxn-drop``: the same, but replies later than the deadline are dropped (the server stops waiting at
  the deadline; the late clients still spend their energy);
- ``preset``: each client trains at the nvpmodel preset of its device type that meets the deadline with
  the least energy until the deadline, chosen from the twin's own noise-free figures (an oracle: an
  operator who measured every preset on every device type for this workload); clients that no preset
  gets there in time are not trained;
- ``plan``: :class:`~jetpredict.integrations.flower.JetpredictStrategy` with jetpredict's fleet plans from
  workload models fitted on 4 twin-profiled modes per Jetson type; clients that no mode gets there in
  time at the plan's confidence are not trained.

Every arm is accounted the same way (:func:`client_rounds`, :func:`round_figures`): per trained client,
the time and energy its node reported and jetpredict's prediction, with intervals, at the mode it ran.
"""

from __future__ import annotations

import logging
import math
import random
import statistics
import tempfile
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from functools import lru_cache
from pathlib import Path
from typing import Any, NoReturn

from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord
from flwr.serverapp import Grid
from flwr.serverapp.strategy import FedAvg
from jetpredict.models.catalogue import PowerMode, load_device
from jetpredict.models.errors import InputError
from jetpredict.models.numbers import checked_number
from jetpredict.predictor.checks import check_confidence
from jetpredict.predictor.fleet import assignment_fields, one_mode
from jetpredict.predictor.fleet import round_figures as mode_figures
from jetpredict.profiler.sim.kernel_costs import cached_workloads

from jetpredict.integrations.flower import (
    DEFAULT_NODE_WAIT_S,
    PROVENANCE_KEYS,
    DeviceQueryError,
    JetpredictStrategy,
    LocalPlanner,
    PlannerError,
    TwinWorkload,
    provenance_of,
    read_report,
    strip_metrics,
    summarize_provenance,
    twin_round,
)
from jetpredict.integrations.flower.strategy import failure_reason

from . import task

log = logging.getLogger(__name__)

ARMS = ("maxn", "maxn-drop", "preset", "plan")
#: The largest run config ``seed`` (numpy's 32-bit seed range).
MAX_SEED = 2**32 - 1
#: Why a node sent a train message has no figures when it never answered.
NO_TRAIN_REPLY = "no reply to the train message"


# ---------------------------------------------------------------------------------------------------
# Settings (the app's run config)
# ---------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class FleetConfig:
    """One run: ``deadline_s``, ``query_timeout_s`` and ``node_wait_timeout_s`` in s (deadline in simulated
    Jetson seconds when the twin costs the rounds); ``arms`` a comma-separated subset of :data:`ARMS`; ``confidence`` of the plan's
    intervals; ``seed`` of the twin's profiling noise and of the training; ``min_nodes`` the nodes each
    round waits for; ``models`` a folder of ``DEVICE.json`` model files (``jetpredict fit --out``), empty =
    fit them on the twin; ``twin_workload`` one the twin has cached (``lenet5-mnist``, ...);
    ``simulate_jetson`` a real boolean; ``results_out`` a JSON file, empty = none. Every field is checked
    on construction: :class:`~jetpredict.models.errors.InputError` (a ValueError) names the run config key
    and the rule it breaks."""

    arms: str = ",".join(ARMS)
    num_server_rounds: int = 3
    local_epochs: int = 5
    deadline_s: float = 10.0
    #: 0.999, not the service's 0.9: on the twin, 90% upper time bounds fell short at AGX Xavier's fastest
    #: modes (4.94 s against 5.36 s) and 99% ones at a Nano mode (9.93 s against 10.01 s), so planned
    #: rounds missed their deadline a few times in a thousand.
    confidence: float = 0.999
    query_timeout_s: float = 120.0
    node_wait_timeout_s: float = DEFAULT_NODE_WAIT_S
    min_nodes: int = 2
    seed: int = 0
    split: str = "iid"
    dirichlet_alpha: float = 0.5
    twin_workload: str = task.TWIN_WORKLOAD
    simulate_jetson: bool = True
    models: str = ""
    results_out: str = ""

    def __post_init__(self) -> None:
        # Every key is checked here, on the ServerApp and on every ClientApp alike: a wrong type or value
        # fails at once naming the key, not rounds later (or never, as a truthy "false" string would).
        for name in ("num_server_rounds", "local_epochs", "min_nodes"):
            _whole(name, getattr(self, name), 1)
        # Seeds feed numpy's generators (no negative seeds) and the clients' torch seeds (seed x 100,003 +
        # ...: within 64 bits while the seed is within 32).
        _whole("seed", self.seed, 0, MAX_SEED)
        for name in ("deadline_s", "query_timeout_s", "node_wait_timeout_s", "dirichlet_alpha"):
            _number(name, getattr(self, name), checked_number)
        _number("confidence", self.confidence, lambda value, _field: check_confidence(value))
        if not isinstance(self.arms, str):
            _refuse("arms", f"be a comma-separated list of some of {', '.join(ARMS)}", self.arms)
        arms = self.arm_list()
        if not arms or any(a not in ARMS for a in arms):
            _refuse("arms", f"list some of {', '.join(ARMS)}", self.arms)
        if len(set(arms)) < len(arms):  # an arm run twice would be reported twice, as if two arms
            _refuse("arms", "name each arm once", self.arms)
        _choice("split", self.split, task.SPLITS)
        _choice("twin_workload", self.twin_workload, cached_workloads())
        if not isinstance(self.simulate_jetson, bool):  # "false" is truthy: it would simulate anyway
            _refuse("simulate_jetson", "be true or false (a TOML boolean, unquoted)", self.simulate_jetson)
        for name, what in (("models", "a folder of DEVICE.json model files, or empty"),
                           ("results_out", "a JSON file path, or empty")):
            if not isinstance(getattr(self, name), str):
                _refuse(name, f"be text ({what})", getattr(self, name))

    def arm_list(self) -> list[str]:
        return [a.strip() for a in self.arms.split(",") if a.strip()]

    @classmethod
    def from_run_config(cls, run_config: Mapping[str, Any]) -> FleetConfig:
        """From Flower's run config (keys as in ``pyproject.toml``: ``deadline-s``, ...); unknown keys are
        refused by name, so a typo does not silently run the default."""
        names = {_key(f.name): f for f in fields(cls)}
        unknown = sorted(set(run_config) - set(names))
        if unknown:
            raise ValueError(f"unknown run config key(s) {', '.join(unknown)}; known: {', '.join(sorted(names))}")
        kwargs: dict[str, Any] = {}
        for key, value in run_config.items():
            f = names[key]
            default = f.default
            # TOML and --run-config give ints for whole floats (deadline-s=10): widen them.
            kwargs[f.name] = float(value) if isinstance(default, float) and isinstance(value, int) \
                and not isinstance(value, bool) else value
        return cls(**kwargs)


def _key(name: str) -> str:
    return name.replace("_", "-")


def _refuse(name: str, rule: str, value: Any) -> NoReturn:
    """Raise :class:`InputError` naming the run config key of field ``name`` and the rule it breaks
    (``rule`` follows "must": ``"be one of ..."``)."""
    raise InputError(f"run config {_key(name)} must {rule}, got {value!r}", _key(name))


def _whole(name: str, value: Any, low: int, high: int | None = None) -> None:
    """Field ``name`` must be a whole number in ``low``..``high`` (booleans are not numbers)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        _refuse(name, f"be a whole number >= {low}" if high is None else f"be a whole number from {low} to {high}",
                value)


def _number(name: str, value: Any, check: Callable[[Any, str], float]) -> None:
    """Field ``name`` must pass the project's ``check`` (``checked_number`` or one built on it) and be a
    number: ``check`` takes numeric text ("5"), but a quoted value in the run config is a mistake."""
    try:
        check(value, _key(name))
    except InputError as err:
        raise InputError(f"run config {err.message}", _key(name)) from None
    if not isinstance(value, int | float):
        _refuse(name, "be a number, not text", value)


def _choice(name: str, value: Any, options: Sequence[str]) -> None:
    """Field ``name`` must be one of ``options``."""
    if not isinstance(value, str) or value not in options:
        _refuse(name, f"be one of {', '.join(options)}", value)


# ---------------------------------------------------------------------------------------------------
# The planner's workload models
# ---------------------------------------------------------------------------------------------------

def fit_fleet_models(seed: int, workload: str = task.TWIN_WORKLOAD, devices: Sequence[str] = task.DEVICES
                     ) -> dict[str, Any]:
    """One fitted model of ``workload`` per Jetson type, as a fleet operator makes them: ``jetpredict plan
    --budget 4`` modes, ``jetpredict profile --device sim:DEVICE`` (here with the twin's noise drawn from ``seed``, which the
    campaign takes as ``CampaignConfig.seed``), ``fit``."""
    from jetpredict.models.profile_rows import validate_records
    from jetpredict.predictor.bundled import fit_workload
    from jetpredict.predictor.service import plan_profiling
    from jetpredict.profiler.campaign import CampaignConfig, run_campaign

    models = {}
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        for device in devices:
            plan_csv = workdir / f"{device}-plan.csv"
            plan_profiling(device, 4).modes.to_csv(plan_csv, index=False)
            rows = run_campaign(CampaignConfig(device=f"sim:{device}", workload=workload, seed=seed,
                                               out=workdir / f"{device}.csv", modes=str(plan_csv), progress=False))
            models[device] = fit_workload(validate_records(rows))
    return models


def load_fleet_models(folder: str | Path) -> dict[str, Path]:
    """``DEVICE.json`` model files of ``folder`` (written by ``jetpredict fit --out``), by device id."""
    found = {p.stem: p for p in sorted(Path(folder).glob("*.json")) if p.stem in task.DEVICES}
    if not found:
        raise ValueError(f"run config models: no DEVICE.json model file in {folder} "
                         f"(DEVICE one of {', '.join(task.DEVICES)})")
    return found


# ---------------------------------------------------------------------------------------------------
# Baselines
# ---------------------------------------------------------------------------------------------------

@lru_cache(maxsize=64)
def _preset_figures(device_id: str, workload: str) -> tuple[tuple[PowerMode, float, float, float], ...]:
    """Per preset of ``device_id``: (mode, epoch time s, epoch energy J, base power W), twin noise-free."""
    device = load_device(device_id)
    out = []
    for preset in device.presets:
        mode = PowerMode(preset.mode, preset.cpu_cores, preset.cpu_mhz, preset.gpu_mhz, preset.emc_mhz)
        f = twin_round(device_id, mode, TwinWorkload(workload), epochs=1)
        out.append((mode, f["time_s"], f["energy_j"], f["base_power_w"]))
    return tuple(out)


class PresetPlanner:
    """A fleet planner (the :class:`~jetpredict.integrations.flower.FleetPlanner` protocol) that gives each
    client the preset of its device type with the least energy until the deadline (training + idle at the
    preset's base power) among those that meet it, judged on the twin's own figures (an oracle).
    ``predictor`` supplies jetpredict's prediction at the chosen preset: the plan's figures and intervals."""

    def __init__(self, predictor: LocalPlanner, workload: str = task.TWIN_WORKLOAD) -> None:
        self.predictor = predictor
        self.workload = workload

    def basis(self) -> Hashable:
        """What its plans rest on: the twin's figures never change, so its predictor's basis."""
        return self.predictor.basis()

    def plan(self, clients: Sequence[Mapping[str, str]], deadline_s: float, epochs: int) -> dict[str, Any]:
        out = []
        for client in clients:
            figures = _preset_figures(client["device"], self.workload)
            meets = [f for f in figures if epochs * f[1] <= deadline_s]
            if meets:
                mode, _, _, base = min(meets, key=lambda f: epochs * f[2] + f[3] * (deadline_s - epochs * f[1]))
                reason = None
            else:
                mode, t, _, base = min(figures, key=lambda f: f[1])
                reason = f"no preset meets deadline_s={deadline_s:g}: the fastest needs {epochs * t:.4g} s"
            # jetpredict's prediction at that preset, idling at the twin's base power (W) until the deadline.
            row = self.predictor.predict(client["device"], mode.as_dict())
            pred = one_mode({**row, "base_power_w": base})
            fields_ = assignment_fields(pred, mode_figures(pred, deadline_s, epochs, client["device"]), 0, reason)
            out.append({**fields_, "id": client["id"], "device": client["device"], "mode": mode.mode,
                        **provenance_of(row)})  # what the prediction at that preset rests on
        return {**summarize_provenance([provenance_of(c) for c in out]), "clients": out,
                "confidence": self.predictor.confidence}


class BaselineFedAvg(FedAvg):
    """Flower's FedAvg that keeps each reply's jetpredict report and, with ``drop_late_s``, aggregates only
    the replies whose reported round time is within it (the simulated clock's version of the server
    giving up at the deadline). A node sent a train message that answers with an error, or not at all, is
    kept too (``failed``, with the ``reason``): it trained, and its energy is unknown."""

    def __init__(self, *, drop_late_s: float | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.drop_late_s = drop_late_s
        self.reports: list[dict[str, Any]] = []
        self._sent: dict[int, list[int]] = {}  # round -> nodes sent a train message

    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
                        ) -> Iterable[Message]:
        messages = list(super().configure_train(server_round, arrays, config, grid))
        self._sent[server_round] = [m.metadata.dst_node_id for m in messages]
        return messages

    def aggregate_train(self, server_round: int, replies: Iterable[Message]
                        ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        kept = []
        replies = list(replies)
        heard = {reply.metadata.src_node_id for reply in replies}
        for node in self._sent.get(server_round, []):
            if node not in heard:
                self.reports.append({"round": server_round, "node_id": node, "aggregated": False, "failed": True,
                                     "reason": NO_TRAIN_REPLY})
        for reply in replies:
            if reply.has_error():
                self.reports.append({"round": server_round, "node_id": reply.metadata.src_node_id,
                                     "aggregated": False, "failed": True, "reason": failure_reason(reply)})
                kept.append(reply)  # FedAvg leaves it out of the average and logs it
                continue
            report = read_report(reply)
            late = (self.drop_late_s is not None and report is not None
                    and float(report.get("time-s", 0.0)) > self.drop_late_s)
            if report is not None:
                self.reports.append({"round": server_round, "node_id": reply.metadata.src_node_id,
                                     "aggregated": not late, **report})
            strip_metrics(reply)  # the jetpredict keys stay out of the averages, as in JetpredictStrategy
            if not late:
                kept.append(reply)
        return super().aggregate_train(server_round, kept)


#: The strategy's settings that the example sets from its run config, by FleetConfig field.
STRATEGY_SETTINGS = {"node_wait_timeout_s": "node_wait_timeout_s", "query_timeout_s": "query_timeout_s",
                     "min_available_nodes": "min_nodes"}


def in_run_config_terms(message: str) -> str:
    """``message`` with the strategy's setting names as the run config keys the user set them by
    (``min_available_nodes`` -> ``run config min-nodes``)."""
    for setting, field in STRATEGY_SETTINGS.items():
        message = message.replace(setting, f"run config {_key(field)}")
    return message


def make_strategy(arm: str, cfg: FleetConfig, planner: LocalPlanner) -> Any:
    """The strategy of ``arm`` (one of :data:`ARMS`) for ``cfg``."""
    common = {"fraction_train": 1.0, "fraction_evaluate": 0.0, "min_train_nodes": 1,
              "min_available_nodes": cfg.min_nodes}
    if arm == "maxn":
        return BaselineFedAvg(**common)
    if arm == "maxn-drop":
        return BaselineFedAvg(drop_late_s=cfg.deadline_s, **common)
    if arm not in ("plan", "preset"):
        raise ValueError(f"arm must be one of {', '.join(ARMS)}, got {arm!r}")
    inner = FedAvg(**common)
    arm_planner = planner if arm == "plan" else PresetPlanner(planner, cfg.twin_workload)
    return JetpredictStrategy(inner, arm_planner, deadline_s=cfg.deadline_s, local_epochs=cfg.local_epochs,
                              query_timeout_s=cfg.query_timeout_s, node_wait_timeout_s=cfg.node_wait_timeout_s)


# ---------------------------------------------------------------------------------------------------
# Accounting: the same for every arm
# ---------------------------------------------------------------------------------------------------

@dataclass
class ClientRound:
    """One trained client in one round: what its node reported (time s, energy J, base power W) and
    jetpredict's prediction at the mode it ran, for its work (``epochs x epoch_scale`` profiled epochs).
    ``aggregated``: its update was used (False: dropped as late, or failed). Predictions are None when
    unknown; so is ``energy_j`` when the node measured none (``energy_null_reason`` says why).
    ``failed``: sent a train message, it answered with an error or not at all: its time and energy are
    None (it spent energy nobody measured) and ``energy_null_reason`` gives the error; device and mode are
    None where the arm never learnt them (the baselines learn them from the report)."""

    arm: str
    round: int
    node_id: int
    device: str | None
    epoch_scale: float | None
    mode: str | None
    time_s: float | None
    energy_j: float | None
    base_power_w: float | None
    aggregated: bool
    pred_time_s: float | None = None
    pred_time_s_low: float | None = None
    pred_time_s_high: float | None = None
    pred_energy_j: float | None = None
    pred_energy_j_low: float | None = None
    pred_energy_j_high: float | None = None
    energy_null_reason: str | None = None
    failed: bool = False


def client_rounds(arm: str, strategy: Any, planner: LocalPlanner
                  ) -> tuple[list[ClientRound], dict[str, dict[str, Any]]]:
    """Every trained client-round of ``strategy`` after a run, with jetpredict's prediction at its mode
    (a selected node that failed or never answered is a row too, ``failed``), and per device what those
    predictions rest on (the :data:`~jetpredict.integrations.flower.PROVENANCE_KEYS`; for a planned arm,
    its plans' for every planned node, trained or not)."""
    rows: list[ClientRound] = []
    if isinstance(strategy, JetpredictStrategy):
        for r in strategy.records:
            if not r.selected:
                continue
            # A reply without a report (an app that times nothing) keeps its update but no figures; the
            # strategy gives such a node its reason, so a reason left unset means no train reply came.
            failed = r.failed or not r.replied
            why = r.energy_null_reason if r.reported_time_s is not None else (r.reason or NO_TRAIN_REPLY)
            rows.append(ClientRound(arm, r.round, r.node_id, r.device, r.epoch_scale, r.mode,
                                    r.reported_time_s, r.reported_energy_j, r.reported_base_power_w, not failed,
                                    r.pred_time_s, r.pred_time_s_low, r.pred_time_s_high, r.pred_energy_j,
                                    r.pred_energy_j_low, r.pred_energy_j_high, why, failed))
        provenance = {rec.device: {k: getattr(rec, k) for k in PROVENANCE_KEYS}
                      for rec in sorted(strategy.records, key=lambda rec: str(rec.device)) if rec.mode}
        return rows, provenance
    cache: dict[tuple[str, str], dict[str, Any] | None] = {}
    for rep in strategy.reports:
        if rep.get("failed"):
            rows.append(ClientRound(arm, int(rep["round"]), int(rep["node_id"]), None, None, None, None, None, None,
                                    False, energy_null_reason=str(rep["reason"]), failed=True))
            continue
        device = str(rep["device"])
        row = ClientRound(arm, int(rep["round"]), int(rep["node_id"]), device, _opt(rep.get("epoch-scale")),
                          str(rep["mode"]), float(rep["time-s"]), _opt(rep.get("energy-j")),
                          _opt(rep.get("base-power-w")), bool(rep["aggregated"]),
                          energy_null_reason=rep.get("energy-null-reason"))
        if row.epoch_scale is not None and rep.get("epochs") is not None:
            key = (device, row.mode)
            if key not in cache:
                try:
                    cache[key] = planner.predict(device, load_device(device).preset(row.mode).as_dict())
                except PlannerError:  # no model for this device type: its rows carry no prediction
                    cache[key] = None
            pred, work = cache[key], float(rep["epochs"]) * row.epoch_scale
            for name, col in (("pred_time_s", "epoch_time_s"), ("pred_energy_j", "epoch_energy_j")):
                for tail in ("", "_low", "_high"):
                    setattr(row, name + tail, None if pred is None else float(pred[col + tail]) * work)
        rows.append(row)
    # A baseline has no plan, yet its rows carry jetpredict's predictions: say what they rest on, per device.
    parts: dict[str, list[dict[str, Any]]] = {}
    for (device, _), pred in sorted(cache.items()):
        if pred is not None:
            parts.setdefault(device, []).append(provenance_of(pred))
    provenance = {}
    for device, device_parts in parts.items():
        merged = summarize_provenance(device_parts)
        if merged["provenance_note"] is None:  # one model per device: its provenance, as the plan arms give it
            del merged["provenance_note"]
        provenance[device] = merged
    return rows, provenance


def _opt(value: Any) -> float | None:
    return None if value is None else float(value)


def round_figures(rows: Sequence[ClientRound], deadline_s: float, rounds: int) -> list[dict[str, Any]]:
    """Per round: clients trained and aggregated; ``failed`` (trained clients that answered with an error
    or not at all); ``work`` (their epoch scales summed: profiled epochs
    per local epoch); ``late`` (reported time over the deadline) and
    ``misses`` (late ones the round waited for); round end (s: the slowest client waited for, or the
    deadline when late ones were dropped); training energy of every trained client, dropped ones included
    (J); energy to the round end (J: training plus idle at the mode's base power until the round ends);
    and how often jetpredict's intervals held the reported time (two-sided, and the upper bound alone:
    the one a deadline needs) and energy.

    Energies are totals of every trained client or None: a client without an energy figure (failed, no
    power meter) or, idling before the round end, without a base power makes the round's total unknown, not a
    smaller number; ``energy_note`` says why (None when both totals are known). ``energy_reported``:
    trained clients that reported energy. ``predicted``: clients with a predicted time interval (the time
    coverage's denominator); ``energy_checked``: clients with a reported energy and a predicted energy
    interval (the energy coverage's)."""
    out = []
    for r in range(1, rounds + 1):
        rs = [row for row in rows if row.round == r]
        waited = [row for row in rs if row.aggregated]
        failed = [row for row in rs if row.failed]
        late = [row for row in rs if row.time_s is not None and row.time_s > deadline_s]
        end = max((row.time_s for row in waited if row.time_s is not None), default=0.0)
        if len(waited) + len(failed) < len(rs):  # late ones dropped: the server stopped waiting at the deadline
            end = deadline_s
        fig: dict[str, Any] = {
            "round": r, "trained": len(rs), "aggregated": len(waited), "failed": len(failed), "late": len(late),
            # Local work trained, in profiled epochs per local epoch: the arms train different clients.
            "work": math.fsum(row.epoch_scale or 0.0 for row in rs),
            "misses": sum(row.aggregated for row in late), "round_end_s": end,
            **_round_energy(rs, end)}
        pred = [row for row in rs if row.pred_time_s_high is not None and row.time_s is not None]
        fig["predicted"] = len(pred)
        fig["time_cover"] = sum(row.pred_time_s_low <= row.time_s <= row.pred_time_s_high for row in pred)
        fig["time_upper_cover"] = sum(row.time_s <= row.pred_time_s_high for row in pred)
        epred = [row for row in rs if row.energy_j is not None and row.pred_energy_j_low is not None
                 and row.pred_energy_j_high is not None]
        fig["energy_checked"] = len(epred)
        fig["energy_cover"] = sum(row.pred_energy_j_low <= row.energy_j <= row.pred_energy_j_high for row in epred)
        fig["time_ape"] = statistics.fmean(abs(row.pred_time_s / row.time_s - 1) for row in pred) if pred else None
        out.append(fig)
    return out


def _round_energy(rs: Sequence[ClientRound], end_s: float) -> dict[str, Any]:
    """``train_energy_j``, ``round_energy_j`` (J, or None when unknown), ``energy_reported`` and
    ``energy_note`` of one round's trained clients ``rs``, the round ending at ``end_s`` (s)."""
    unmetered = [row for row in rs if row.energy_j is None]
    # Idle energy until the round end needs the mode's base power; a client that ran to the end has none.
    no_base = [row for row in rs if row.energy_j is not None and row.base_power_w is None and end_s > row.time_s]
    notes = []
    for rows, what in (([row for row in unmetered if row.failed], "failed"),
                       ([row for row in unmetered if not row.failed], "reported no energy")):
        if rows:
            why = sorted({row.energy_null_reason or "no reason given" for row in rows})
            notes.append(f"{len(rows)} of {len(rs)} trained clients {what} ({'; '.join(why)})")
    note = "; ".join(notes) or None
    if not unmetered and no_base:
        note = (f"{len(no_base)} of {len(rs)} trained clients reported no base power: their idle energy until "
                f"the round end is unknown")
    train = None if unmetered else math.fsum(row.energy_j for row in rs)
    to_end = None if unmetered or no_base else math.fsum(
        row.energy_j + (row.base_power_w or 0.0) * max(0.0, end_s - row.time_s) for row in rs)
    return {"train_energy_j": train, "round_energy_j": to_end, "energy_reported": len(rs) - len(unmetered),
            "energy_note": note}


# ---------------------------------------------------------------------------------------------------
# One run of the arms on a grid
# ---------------------------------------------------------------------------------------------------

def make_evaluate(x_test: Any = None, y_test: Any = None) -> Any:
    """Centralized evaluation on the held-out digits: accuracy of the global model after each round."""
    if x_test is None:
        x_test, y_test = task.test_data()

    def evaluate(server_round: int, arrays: ArrayRecord) -> MetricRecord:
        net = task.Net()
        net.load_state_dict(arrays.to_torch_state_dict())
        return MetricRecord({"accuracy": task.accuracy(net, x_test, y_test)})

    return evaluate


def run_arms(grid: Grid, cfg: FleetConfig, models: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Run each arm of ``cfg`` in turn on ``grid`` (same nodes, same initial model) and account for it.

    Returns per arm: ``arm``, ``rows`` (:class:`ClientRound` dicts), ``rounds`` (:func:`round_figures`),
    ``accuracy`` (round -> test accuracy, round 0 = the initial model), ``empty_rounds`` (rounds that
    trained nobody), ``excluded`` (round -> how many nodes the arm did not train), ``exclusions`` (round ->
    reason -> the nodes left out for it; rounds that left nobody out are absent), ``confidence_notes`` (what the
    plan said of its confidence, see :class:`~jetpredict.integrations.flower.plans.ClientPlan`),
    ``provenance`` (device -> what the predictions of its modes rest on, the
    :data:`~jetpredict.integrations.flower.PROVENANCE_KEYS`: for the planned arms, of the planned modes; for
    the ``maxn`` arms, of the predictions at the presets their nodes ran; see :func:`client_rounds`),
    ``strategy``.
    """
    import torch

    planner = LocalPlanner(dict(models), confidence=cfg.confidence)
    evaluate = make_evaluate()
    torch.manual_seed(cfg.seed)
    initial = ArrayRecord(task.Net().state_dict())
    out = []
    for arm in cfg.arm_list():
        # FedAvg samples nodes with Python's random: its order is the order updates are summed in, so an
        # unseeded sample changes the global model in the last bits and reruns differ.
        random.seed(cfg.seed)
        strategy = make_strategy(arm, cfg, planner)
        try:
            result = strategy.start(grid=grid, initial_arrays=initial, num_rounds=cfg.num_server_rounds,
                                    train_config=ConfigRecord({"local-epochs": cfg.local_epochs, "seed": cfg.seed}),
                                    evaluate_fn=evaluate)
        except DeviceQueryError as err:
            raise DeviceQueryError(f"{arm} arm: {in_run_config_terms(str(err))}") from err
        rows, provenance = client_rounds(arm, strategy, planner)
        figures = round_figures(rows, cfg.deadline_s, cfg.num_server_rounds)
        excluded, exclusions, notes = {}, {}, []
        if isinstance(strategy, JetpredictStrategy):
            for r in range(1, cfg.num_server_rounds + 1):
                why: dict[str, list[int]] = {}
                for rec in strategy.records:
                    if rec.round == r and not rec.selected:
                        why.setdefault(rec.reason or "no reason given", []).append(rec.node_id)
                excluded[r] = sum(map(len, why.values()))
                if why:
                    exclusions[r] = {reason: sorted(nodes) for reason, nodes in sorted(why.items())}
            notes = sorted({rec.confidence_note for rec in strategy.records if rec.confidence_note})
        out.append({"arm": arm, "rows": [asdict(row) for row in rows], "rounds": figures,
                    "accuracy": {r: float(m["accuracy"]) for r, m in result.evaluate_metrics_serverapp.items()},
                    "empty_rounds": [f["round"] for f in figures if f["aggregated"] == 0],
                    "excluded": excluded, "exclusions": exclusions, "confidence_notes": notes, "provenance": provenance,
                    "strategy": strategy})
    return out
