"""Per-device knob ranges and the cross-field rules in the OpenAPI document, so that it is as strict as
the server.

The marshmallow schemas (:mod:`api.schemas`) check mode knobs against the union of the catalogue's
ranges; the service then checks each knob against the range of *its* device (a profile row's ``device``,
a prediction's ``device``). :func:`add_device_ranges` writes that second rule into the document, once at
app creation, from the catalogue:

- every ``rows`` array of a request body is a ``oneOf`` of arrays of ``ProfileRow.<device>`` rows: one
  device per array (the server fits one device at a time), and each variant has ``device: enum [that
  id]`` and that device's min/max of ``cpu_cores``, ``cpu_mhz``, ``gpu_mhz`` and ``emc_mhz``.
- ``PredictionRequest`` keeps its catalogue-wide properties and adds a ``oneOf`` of
  ``PredictionRequest.ForDevice`` (``device`` given: a ``oneOf`` of ``PredictionRequest.<device>`` with
  a ``discriminator`` on ``device``, whose mode objects carry that device's ranges) and
  ``PredictionRequest.WorkloadDevice`` (no ``device``: the workload's device, unknown to the document, so
  ``modes`` may only be ``"presets"`` or ``"all"`` there). The server also accepts mode objects without
  ``device`` when they lie in the workload's device's range; the document leaves that out (it cannot
  name the range), which makes it stricter than the server, never looser.

The row variants also carry the fit's lower bound on ``epoch_time_s``
(:data:`predictor.terms.MIN_EPOCH_TIME_S`): every ``rows`` array of a request body is fitted.

JSON Schema cannot compare two fields or two items. The rules of that kind that the server enforces are
stated in the descriptions and, for tools, in the extension ``x-jetpredict-rules`` (a list; see
:data:`RULE_KINDS`), built here from the constants the server's checks use:

- on a row: ``at-most`` (a part of the epoch or of the power at most ``factor`` x the whole) and
  ``ratio-range`` (``field`` / ``per`` within ``min``..``max``: the time of one minibatch, the mean power an
  epoch's energy implies; :func:`models.profile_rows.plausibility_rules`);
- on a recommendation request: ``device-max`` (the power cap at most the device's plausible maximum);
- on ``rows``: ``same-values`` (rows that agree on ``key`` agree on ``values``, unless a ``key`` field is
  one of ``generic``, compared without case) and ``max-ratio`` (rows that agree on ``key`` have
  ``field`` values at most ``ratio`` apart; ``defaults`` fill fields left out or null);
- on an upload's ``rows``: ``max-distinct`` (at most ``max`` different values of ``key``);
- on ``clients``: ``unique`` (no two items agree on ``key``).

Text is compared as the server reads it: with white space stripped. Ranges are the catalogue's inclusive
(min, max); the server allows :data:`models.catalogue.RANGE_TOLERANCE_MHZ` more on clocks, so the
document is the stricter of the two.
"""

from __future__ import annotations

import copy
from typing import Any

from jetpredict.api.query_schemas import MODE_IN_DOC
from jetpredict.api.schemas import PROFILE_ROW_DOC
from jetpredict.api.upload_groups import MAX_UPLOAD_WORKLOADS
from jetpredict.models.catalogue import MODE_FIELDS, list_devices
from jetpredict.models.profile_rows import (
    COMPONENT_SLACK,
    DEFAULT_NUM_WORKERS,
    DUPLICATE_TIME_SPREAD,
    ENERGY_PRODUCT_SLACK,
    GENERIC_LABELS,
    POWER_FIELDS,
    ROW_PARTS,
    ROW_PRODUCT,
    SAME_LABEL_FIELDS,
    SAME_RUN_FIELDS,
    plausibility_rules,
)
from jetpredict.predictor.terms import MIN_EPOCH_TIME_S

PROFILE_ROW = "ProfileRow"  # prefix of the per-device row variants
PREDICTION_REQUEST = "PredictionRequest"
FLEET_REQUEST = "FleetPlanRequest"
RECOMMENDATION_REQUEST = "RecommendationRequest"
#: Request-body schemas (component names) whose ``rows`` are profile rows, and the fields that tell two
#: workloads apart in them: an upload may hold several workloads; inline rows are one workload (their
#: ``workload`` cells are labels, see :func:`api.client_rows.as_one_workload`).
ROWS_SCHEMAS = {"WorkloadRef": (), "ProfileUpload": ("workload",)}
RULES = "x-jetpredict-rules"
#: On an operation: pairs of query-parameter groups that say one thing two ways (a list of ``[group, group]``,
#: each group a list of names); a request gives parameters of one group of each pair at most, else a 422.
EXCLUSIVE_PARAMETERS = "x-jetpredict-exclusive-parameters"
#: The kinds of rule in ``x-jetpredict-rules``.
RULE_KINDS = ("at-most", "product", "same-values", "max-ratio", "unique", "max-distinct", "ratio-range",
              "device-max")


def row_rules() -> list[dict[str, Any]]:
    """The rules inside one profile row (:data:`models.profile_rows.ROW_PARTS` and ``ROW_PRODUCT``)."""
    field, factors = ROW_PRODUCT
    return [*({"rule": "at-most", "fields": list(parts), "than": whole, "factor": COMPONENT_SLACK}
              for parts, whole in ROW_PARTS),
            {"rule": "product", "field": field, "of": list(factors), "factor": ENERGY_PRODUCT_SLACK}]


def rows_rules(workload_fields: tuple[str, ...]) -> list[dict[str, Any]]:
    """The rules across the rows of one array (:func:`models.profile_rows.mode_conflicts`); rows of
    different workloads never conflict where ``workload_fields`` is ``("workload",)``."""
    def key(fields: tuple[str, ...]) -> list[str]:  # one device per array (the oneOf says so)
        return [f for f in fields if f != "device" and (f != "workload" or f in workload_fields)]

    rules = [{"rule": "same-values", "key": key(SAME_LABEL_FIELDS), "values": list(MODE_FIELDS),
              "generic": {"mode": [g for g in GENERIC_LABELS if g]}},
             {"rule": "max-ratio", "key": key(SAME_RUN_FIELDS), "field": "epoch_time_s",
              "ratio": DUPLICATE_TIME_SPREAD, "defaults": {"num_workers": DEFAULT_NUM_WORKERS}}]
    if "workload" in workload_fields:  # each workload of an upload is fitted: a bounded number of them
        rules.append({"rule": "max-distinct", "key": ["workload"], "max": MAX_UPLOAD_WORKLOADS})
    return rules


def _rules_text(rules: list[dict[str, Any]]) -> str:
    """The rules in words, for the descriptions."""
    words = []
    for r in rules:
        if r["rule"] == "at-most":
            words.append(f"{' + '.join(r['fields'])} (those given) <= {r['factor']:g} x {r['than']}")
        elif r["rule"] == "product":
            words.append(f"{r['field']} within {r['factor']:g}x of {' x '.join(r['of'])} (when all are given)")
        elif r["rule"] == "same-values":
            words.append(f"rows with the same {', '.join(r['key'])} (other than "
                         f"{', '.join(next(iter(r['generic'].values())))}) have the same {', '.join(r['values'])}")
        elif r["rule"] == "max-ratio":
            group = f"rows with the same {', '.join(r['key'])}" if r["key"] else "all rows"
            words.append(f"{group} have {r['field']} at most {r['ratio']:g}x apart")
        elif r["rule"] == "max-distinct":
            words.append(f"at most {r['max']} different {', '.join(r['key'])}")
        elif r["rule"] == "ratio-range":  # models.profile_rows.plausibility_rules
            per = " / ".join(filter(None, (r["per"], r.get("per_also"))))
            words.append(f"{r['field']} / {per} in {r['min']:g}..{r['max']:g} {r['unit']}")
        elif r["rule"] == "device-max":  # models.catalogue.Device.check_power_cap
            words.append(f"{'.'.join(r['field'])} at most the device's maximum (by device: "
                         f"{', '.join(f'{d} {v:g}' for d, v in r['max'].items())} {r['unit']}; without "
                         "device, the workload's device's)")
        else:
            words.append(f"no two items with the same {', '.join(r['key'])}")
    return "; ".join(words)


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _with_ranges(doc: dict[str, Any], ranges: dict[str, tuple[float, float]]) -> dict[str, Any]:
    """``doc`` (an object schema with the mode knobs as properties) narrowed to ``ranges`` (cores; MHz)."""
    out = copy.deepcopy(doc)
    for knob in MODE_FIELDS:
        lo, hi = ranges[knob]
        prop = out["properties"][knob]
        if prop.get("type") == "integer":
            lo, hi = int(lo), int(hi)
        prop.update(minimum=lo, maximum=hi)
        prop.pop("exclusiveMinimum", None)  # lo > 0 for every clock: the plain minimum says more
    return out


def _discriminated(variants: dict[str, str]) -> dict[str, Any]:
    """``oneOf`` of component refs (device id -> component name), discriminated by ``device``."""
    return {"oneOf": [_ref(name) for name in variants.values()],
            "discriminator": {"propertyName": "device",
                              "mapping": {d: f"#/components/schemas/{name}" for d, name in variants.items()}}}


def add_device_ranges(schemas: dict[str, dict[str, Any]]) -> None:
    """Add the per-device variants and the cross-field rules to ``schemas`` (the document's
    ``components.schemas``, in place)."""
    devices = list_devices()
    rows: dict[str, str] = {}
    in_row = row_rules()
    for device in devices:
        row = _with_ranges(PROFILE_ROW_DOC, device.knob_ranges())
        row["properties"]["device"] = {"type": "string", "enum": [device.id]}
        # Rows in a request body are always fitted, and the fit refuses epoch times below this bound.
        row["properties"]["epoch_time_s"].pop("exclusiveMinimum", None)
        row["properties"]["epoch_time_s"]["minimum"] = MIN_EPOCH_TIME_S
        # Measured powers within the module's plausible range (models.profile_rows.implausible).
        low_w, high_w = device.power_range_w
        for name in POWER_FIELDS:
            row["properties"][name].pop("exclusiveMinimum", None)
            row["properties"][name].update(minimum=low_w, maximum=high_w)
        rules = [*plausibility_rules(device.id), *in_row]
        row["description"] = (f"a profile row of {device.id} (knob and power ranges: that device's); "
                              f"{_rules_text(rules)}")
        row[RULES] = rules
        rows[device.id] = name = f"{PROFILE_ROW}.{device.id}"
        schemas[name] = row
    for name, workload_fields in ROWS_SCHEMAS.items():
        # One device per array: a oneOf of arrays whose rows are all of one device.
        old = schemas[name]["properties"]["rows"]
        across = rows_rules(workload_fields)
        schemas[name]["properties"]["rows"] = {
            "type": "array", "description": (f"{old.get('description', 'profile rows')}; all rows of one device; "
                                             f"{_rules_text(across)}"),
            "oneOf": [{"type": "array", "minItems": old["minItems"], "maxItems": old["maxItems"],
                       "items": _ref(variant)} for variant in rows.values()],
            RULES: across}

    schemas[PREDICTION_REQUEST] = base = copy.deepcopy(schemas[PREDICTION_REQUEST])
    modes = base["properties"]["modes"]
    presets = next(v for v in modes["oneOf"] if v.get("type") == "string")
    mode_list = next(v for v in modes["oneOf"] if v.get("type") == "array")
    per_device: dict[str, str] = {}
    for device in devices:
        variant = copy.deepcopy(base)
        variant["properties"]["device"] = {"type": "string", "enum": [device.id],
                                           "description": base["properties"]["device"].get("description", "")}
        variant["required"] = sorted({*base.get("required", ()), "device"})
        items = _with_ranges(MODE_IN_DOC, device.knob_ranges())
        items["description"] = f"a mode of {device.id} (knob ranges: that device's)"
        variant["properties"]["modes"]["oneOf"] = [presets, {**mode_list, "items": items}]
        variant["properties"]["modes"]["description"] = (
            modes.get("description", "") + f"; mode objects within {device.id}'s knob ranges")
        per_device[device.id] = name = f"{PREDICTION_REQUEST}.{device.id}"
        schemas[name] = variant
    schemas[f"{PREDICTION_REQUEST}.ForDevice"] = _discriminated(per_device)
    own = copy.deepcopy(base)
    del own["properties"]["device"]  # additionalProperties is false: no device here
    own["properties"]["modes"] = {**presets, "default": modes.get("default", "presets"), "description":
                                  'without device: "presets" or "all" (give device to list modes: they must '
                                  "lie in its ranges)"}
    own["description"] = "predict for the workload's own device"
    schemas[f"{PREDICTION_REQUEST}.WorkloadDevice"] = own
    base["oneOf"] = [_ref(f"{PREDICTION_REQUEST}.ForDevice"), _ref(f"{PREDICTION_REQUEST}.WorkloadDevice")]
    base["description"] = "with device: mode objects within that device's ranges; without: presets or all"
    clients = schemas[FLEET_REQUEST]["properties"]["clients"]
    clients[RULES] = [{"rule": "unique", "key": ["id"]}]  # predictor.fleet.check_clients
    recommendation = schemas[RECOMMENDATION_REQUEST]
    recommendation[RULES] = cap_rules = [{"rule": "device-max", "field": ["constraints", "max_power_w"],
                                          "device": "device", "unit": "W",
                                          "max": {d.id: d.power_range_w[1] for d in devices}}]
    recommendation["description"] = f"{recommendation.get('description', '')} {_rules_text(cap_rules)}".strip()
