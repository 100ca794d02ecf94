"""Fleet planners: one ``POST /v1/fleet-plans`` answer per round, in process or from a running service.

A planner answers :meth:`FleetPlanner.plan` with the fleet plan's JSON shape: per client its mode and the
round's time and energy with their intervals (:class:`~jetpredict.predictor.fleet.ClientAssignment`),
which is all :func:`~.plans.plan_nodes` needs, and what the plan rests on (:data:`PROVENANCE_KEYS`, as
every jetpredict answer states it): at the top, and in each client entry for the plan that chose its mode
(clients of different devices may be planned by different models, see :func:`summarize_provenance`). ``predict`` (one mode's prediction) is there for callers
that account for modes the planner did not choose (a baseline's MAXN); planning never calls it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from jetpredict.client import (
    DEFAULT_TIMEOUT_S,
    BadRequest,
    Client,
    ConnectionFailed,
    Overloaded,
    ServiceError,
    Unauthorized,
)
from jetpredict.models.catalogue import load_device
from jetpredict.models.errors import InputError
from jetpredict.predictor.checks import check_confidence
from jetpredict.predictor.limits import PROVENANCE_FIELDS

#: What a plan rests on: the workload id and :data:`~jetpredict.predictor.limits.PROVENANCE_FIELDS`.
PROVENANCE_KEYS: tuple[str, ...] = ("workload_id", *PROVENANCE_FIELDS)


class PlannerError(RuntimeError):
    """The fleet planner could not plan a round (the service refused or was unreachable)."""

    @property
    def round_wide(self) -> bool:
        """True when the cause is the service's state, not the request: no answer (refused, timed out),
        overloaded (429/503, a proxy's 502/504), the caller's key refused (401/403) or a server error (5xx). Every other
        request of the round would fail alike, each after its own retries (up to ``retries + 1`` times
        ``timeout_s``). False for a refusal of the request itself (400/422: a ``deadline_s`` past the
        service's limit; 404: one device's workload) and for an error raised by the planner itself."""
        cause = self.__cause__
        if isinstance(cause, ConnectionFailed | Overloaded | Unauthorized):
            return True
        return isinstance(cause, ServiceError) and cause.status is not None and cause.status >= 500


class FleetPlanner(Protocol):
    """What :class:`~.strategy.JetpredictStrategy` needs from a planner (``basis`` is optional: it is read
    with getattr, so a planner with ``plan`` only keeps the age rule of :data:`~.plans.PLAN_CACHE_ROUNDS`)."""

    def plan(self, clients: Sequence[Mapping[str, str]], deadline_s: float, epochs: int) -> dict[str, Any]:
        """The ``POST /v1/fleet-plans`` answer for ``clients`` (``[{"id", "device"}]``) under ``deadline_s``
        (s) for ``epochs`` local epochs."""

    def basis(self) -> Hashable | None:
        """What the planner's plans rest on now, compared with ``==`` and read cheaply once per round
        (:func:`~.plans.plan_nodes` asks again for plans cached under another basis); None: the planner
        cannot say (cached plans are then asked for again after :data:`~.plans.PLAN_CACHE_ROUNDS` rounds).
        A failure raises :class:`PlannerError`."""
        return None


#: Workload summaries :meth:`HttpPlanner.basis` asks for per page (the service's default page).
BASIS_PAGE = 100


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


def provenance_of(answer: Mapping[str, Any]) -> dict[str, Any]:
    """The :data:`PROVENANCE_KEYS` of one answer (a fleet plan, a prediction row); None where it has none."""
    return {k: _plain(answer.get(k)) for k in PROVENANCE_KEYS}


def summarize_provenance(parts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The top-level provenance of a plan merged from the plans of several models (``parts``: each one's
    :func:`provenance_of`), with ``provenance_note`` saying how it was merged (None for one part, whose
    provenance it is unchanged): the fields :func:`~jetpredict.predictor.provenance.merged_provenance` merges as it
    does (the least trusted sources, the weakest split, the fewest profiled modes), ``workload_id`` and
    ``model_version`` the parts' one value, or None when they differ. Each client entry keeps its own part's
    provenance."""
    distinct = [dict(p) for i, p in enumerate(parts) if dict(p) not in [dict(q) for q in parts[:i]]]
    if len(distinct) <= 1:
        return {**(distinct[0] if distinct else dict.fromkeys(PROVENANCE_KEYS)), "provenance_note": None}
    from jetpredict.predictor.provenance import merged_provenance

    def known(key: str) -> list[Any]:
        return [p[key] for p in distinct if p.get(key) is not None]

    def one(key: str) -> Any:
        values = set(known(key))
        return values.pop() if len(values) == 1 and len(known(key)) == len(distinct) else None

    out: dict[str, Any] = {
        "workload_id": one("workload_id"), **merged_provenance(distinct), "model_version": one("model_version")}
    differ = [k for k in ("workload_id", "model_version") if out[k] is None and known(k)]
    out["provenance_note"] = (
        f"clients planned by {len(distinct)} models: reference_source and workload_source are the least "
        f"trusted of theirs, split_source epoch_totals if any part's is, profiled_modes the fewest"
        + (f"; {' and '.join(differ)} differ (null here)" if differ else "")
        + "; each client entry states its own")
    return out


def _plan_groups(clients: Sequence[Mapping[str, str]], source_for: Callable[[str], Any],
                 key: Callable[[Any], Any], plan_group: Callable[[Any, list[dict[str, str]]], Any]
                 ) -> dict[str, Any]:
    """One fleet plan per model (or workload) serving some of ``clients``, merged in the clients' order.

    ``source_for(device)`` gives the model serving a device (None: the client is not planned, with the
    reason); ``plan_group(source, clients)`` plans the clients it serves. A group whose plan is refused (a
    :class:`PlannerError` not :attr:`~PlannerError.round_wide`: one device's workload unknown, say) leaves
    only its clients unplanned, with the reason; when every group is refused, the first refusal is raised,
    and a round-wide failure is raised at once. Each planned client's entry carries its own provenance
    (:data:`PROVENANCE_KEYS`) as the fleet answer states it per client, and its group's for a key the entry
    lacks; the top level summarizes the groups' (:func:`summarize_provenance`).
    """
    groups: dict[Any, tuple[Any, list[int]]] = {}
    out: list[dict[str, Any] | None] = [None] * len(clients)
    for pos, client in enumerate(clients):
        source = source_for(client["device"])
        if source is None:
            out[pos] = {"id": client["id"], "device": client["device"], "meets_deadline": False,
                        "reason": f"no workload model for device {client['device']!r}"}
        else:
            groups.setdefault(key(source), (source, []))[1].append(pos)
    confidence = None
    notes: list[str] = []
    parts: list[dict[str, Any]] = []
    refused: list[PlannerError] = []
    for source, positions in groups.values():
        try:
            plan = plan_group(source, [{"id": str(clients[p]["id"]), "device": str(clients[p]["device"])}
                                       for p in positions])
        except PlannerError as err:
            if err.round_wide:
                raise
            refused.append(err)
            for pos in positions:
                out[pos] = {"id": clients[pos]["id"], "device": clients[pos]["device"], "meets_deadline": False,
                            "reason": f"the planner refused the workload of device {clients[pos]['device']!r}: "
                                      f"{err}"}
            continue
        plan = plan.as_dict() if hasattr(plan, "as_dict") else dict(plan)
        confidence = plan.get("confidence") if confidence is None else confidence
        if plan.get("confidence_note") and plan["confidence_note"] not in notes:
            notes.append(plan["confidence_note"])
        provenance = provenance_of(plan)
        parts.append(provenance)
        for pos, client in zip(positions, plan["clients"], strict=True):
            out[pos] = {**client, **{k: v for k, v in provenance.items() if k not in client}}
    if refused and len(refused) == len(groups):
        raise refused[0]
    planned = [c for c in out if c is not None]
    late = [c["id"] for c in planned if not c.get("meets_deadline")]
    met = [float(c.get("energy_j") or 0.0) for c in planned if c.get("meets_deadline")]
    total = math.fsum(met) if met else None  # as the service's plans: no client in time is not a free round
    return {**summarize_provenance(parts), "feasible": not late, "total_energy_j": total,
            "confidence": confidence, "clients": planned, "infeasible_clients": late,
            "confidence_note": "; ".join(notes) or None}


def _workload_id(model: Any) -> str | None:
    """The workload id of a fitted model (or of a workload's models per device: their primary one's)."""
    models = getattr(model, "models", None)
    if isinstance(models, Mapping) and getattr(model, "primary", None) in models:
        model = models[model.primary]
    return getattr(model, "workload_id", None)


def _checked_confidence(confidence: float | None) -> float | None:
    """``confidence`` checked as the service checks it (None: the service's default), so that a bad level
    fails when the planner is built, naming the field, not at the first round of a running ServerApp."""
    return None if confidence is None else check_confidence(confidence)


def _plain(value: Any) -> Any:
    """numpy scalars -> Python scalars (ConfigRecord and JSON take only those)."""
    item = getattr(value, "item", None)
    return item() if callable(item) else value


class LocalPlanner:
    """Plans in this process with :mod:`jetpredict.predictor.service` (no HTTP, no database).

    ``model``: a fitted workload model (``predictor.bundled.fit_workload``), the path of a model file
    written by ``jetpredict fit --out``, or a mapping device id -> either (clients of a device without
    an entry use key ``"*"`` when given; otherwise they are not planned). One model serves every device
    type through cross-device predictions; per-device models are better when each type was profiled.
    ``confidence``: coverage of the intervals, the deadline holding for their upper end (None = the
    service's default, 0.9); a level outside [0.5, 0.999] raises InputError here.
    """

    def __init__(self, model: Any, confidence: float | None = None) -> None:
        from jetpredict.predictor import service

        self._service = service
        self.confidence = _checked_confidence(confidence)
        default, table = _per_device(model, lambda m: not isinstance(m, Mapping))
        self._default = None if default is None else self._load(default)
        self._models = {device: self._load(m) for device, m in table.items()}

    @staticmethod
    def _load(model: Any) -> Any:
        if isinstance(model, str | Path):
            from jetpredict.predictor.bundled import load_model

            return load_model(model)
        return model

    def _extra(self) -> dict[str, float]:
        return {} if self.confidence is None else {"confidence": self.confidence}

    def basis(self) -> Hashable:
        """A constant: its models, loaded once, never change under it (the cache key holds the planner)."""
        return ()

    def model_for(self, device: str) -> Any:
        """The workload model that plans clients of ``device`` (None when there is none)."""
        return self._models.get(device, self._default)

    def plan(self, clients: Sequence[Mapping[str, str]], deadline_s: float, epochs: int) -> dict[str, Any]:
        """One :func:`~jetpredict.predictor.service.fleet_answer` (the ``POST /v1/fleet-plans`` answer, with
        its provenance) per model serving some of ``clients``."""
        def plan_group(model: Any, group: list[dict[str, str]]) -> dict[str, Any]:
            try:
                return self._service.fleet_answer(model, group, deadline_s, epochs=epochs,
                                                  workload_id=_workload_id(model), **self._extra())
            except InputError as err:  # what the service answers with a 422: a refusal of this request only
                raise PlannerError(err.message) from err

        return _plan_groups(clients, self.model_for, id, plan_group)

    def predict(self, device: str, mode: Mapping[str, Any]) -> dict[str, Any]:
        """One prediction row: ``mode`` on ``device`` with its intervals (s, W, J per epoch) and what it
        rests on (:data:`PROVENANCE_KEYS`)."""
        model = self.model_for(device)
        if model is None:
            raise PlannerError(f"no workload model for device {device!r}")
        table = self._service.predict(model, [dict(mode)], device, **self._extra())
        return {"workload_id": _workload_id(model), **{k: _plain(v) for k, v in table.iloc[0].to_dict().items()}}


class HttpPlanner:
    """Plans through a running ``jetpredict serve`` with the public :class:`jetpredict.client.Client`.

    ``url``: the service's base URL, or a :class:`~jetpredict.client.Client` (then ``timeout_s``,
    ``headers`` and ``api_key`` are its own). ``workload``: a stored workload id, a workload object
    (``{"id": ...}`` or ``{"rows": [...]}``), or a mapping device id -> either (key ``"*"`` = the others).
    ``timeout_s``: per request, s. ``confidence``: as for :class:`LocalPlanner` (checked here, as the
    service would check it, rather than refused with a 422 every round). A refusal or no answer
    (after the client's retries) raises :class:`PlannerError` naming the request and the status.
    """

    def __init__(self, url: str | Client, workload: Any, timeout_s: float = DEFAULT_TIMEOUT_S,
                 confidence: float | None = None, headers: Mapping[str, str] | None = None,
                 api_key: str | None = None) -> None:
        self.client = url if isinstance(url, Client) else Client(url, api_key=api_key, timeout_s=timeout_s,
                                                                 headers=headers)
        self.url = self.client.base_url
        self.confidence = _checked_confidence(confidence)

        def single(w: Any) -> bool:
            return isinstance(w, str) or (isinstance(w, Mapping) and ("id" in w or "rows" in w))

        default, table = _per_device(workload, single)
        self._default = None if default is None else self._workload(default)
        self._workloads = {device: self._workload(w) for device, w in table.items()}

    @staticmethod
    def _workload(w: Any) -> dict[str, Any]:
        """A request's workload object; a blank id is refused here, not by every plan request of the run."""
        workload = {"id": w} if isinstance(w, str) else dict(w)
        if "id" in workload and not (isinstance(workload["id"], str) and workload["id"].strip()):
            raise InputError("give one workload, or a mapping of device id -> workload: a workload id must be a "
                             f"non-empty string, got {workload['id']!r}", "workload")
        return workload

    def basis(self) -> Hashable | None:
        """Per stored workload id it names, that workload's ``revision`` and its fits' ``model_version``
        (None for an id not stored: an upload of it is a change too), from one light ``GET
        /v1/workloads?search=<id>`` per id (summaries, no rows). None when every workload is given inline
        (rows: nothing stored to change)."""
        ids = sorted({str(w["id"]).strip() for w in (self._default, *self._workloads.values())
                      if w is not None and w.get("id") is not None})
        if not ids:
            return None
        out = []
        for workload_id in ids:
            summary = self._summary(workload_id)
            out.append((workload_id, None if summary is None else (
                summary["revision"], tuple((f["device"], f["model_version"]) for f in summary["fits"]))))
        return tuple(out)

    def _summary(self, workload_id: str) -> dict[str, Any] | None:
        """The stored workload ``workload_id``'s summary (None when it is not stored): the exact id among
        the ids containing it, case-insensitively (further pages only where more than a page contain it)."""
        if not workload_id:
            return None  # a blank id is no stored workload's (the search would list them all)
        offset = 0
        while True:
            try:
                page = self.client.workloads(search=workload_id, limit=BASIS_PAGE, offset=offset)
            except ServiceError as err:
                if isinstance(err, BadRequest) and "search" in str(err.field or ""):
                    return None  # an id no upload can store (its characters, its length): nothing to change
                raise PlannerError(f"reading the revision of workload {workload_id!r}: {err}") from err
            found = page.get("workloads") or []
            match = next((w for w in found if w.get("id") == workload_id), None)
            offset += len(found)
            if match is not None or not found or offset >= int(page.get("total") or 0):
                return match

    def _ask(self, call: Callable[..., dict[str, Any]], workload: Mapping[str, Any], *args: Any,
             **kwargs: Any) -> dict[str, Any]:
        try:
            answer = call(workload, *args, confidence=self.confidence, **kwargs)
        except ServiceError as err:  # every typed error of the client: refused, overloaded, unreachable
            raise PlannerError(str(err)) from err
        if answer.get("workload_id") is None and workload.get("rows"):
            # Inline rows name no stored workload; their label names the workload, as a LocalPlanner's fit
            # of the same rows does (the service reads every cell of an inline workload as its first label).
            label = next((r.get("workload") for r in workload["rows"]
                          if isinstance(r, Mapping) and r.get("workload")), None)
            answer = {**answer, "workload_id": None if label is None else str(label)}
        return answer

    def plan(self, clients: Sequence[Mapping[str, str]], deadline_s: float, epochs: int) -> dict[str, Any]:
        """One ``POST /v1/fleet-plans`` per workload serving some of ``clients``."""
        return _plan_groups(clients, lambda device: self._workloads.get(device, self._default),
                            lambda w: json.dumps(w, sort_keys=True),
                            lambda w, group: self._ask(self.client.fleet_plans, w, group, deadline_s, epochs=epochs))

    def predict(self, device: str, mode: Mapping[str, Any]) -> dict[str, Any]:
        """One ``POST /v1/predictions`` row: ``mode`` on ``device`` with its intervals and the answer's
        provenance (:data:`PROVENANCE_KEYS`)."""
        workload = self._workloads.get(device, self._default)
        if workload is None:
            raise PlannerError(f"no workload for device {device!r}")
        answer = self._ask(self.client.predictions, workload, device=device, modes=[dict(mode)])
        return {**{k: answer[k] for k in PROVENANCE_KEYS if k in answer}, **answer["predictions"][0]}
