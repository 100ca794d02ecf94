"""Per-device knob ranges in the OpenAPI document, so that it is as strict as the server.

The marshmallow schemas (:mod:`api.schemas`) check mode knobs against the union of the catalogue's
ranges; the service then checks each knob against the range of *its* device (a profile row's ``device``,
a prediction's ``device``). :func:`add_device_ranges` writes that second rule into the document, once at
app creation, from the catalogue:

- a profile row (the items of every ``rows`` array of a request body) keeps its catalogue-wide fields and
  adds a ``oneOf`` of ``ProfileRow.<device>`` variants with a ``discriminator`` on ``device``; each
  variant has ``device: enum [that id]`` and that device's min/max of ``cpu_cores``, ``cpu_mhz``,
  ``gpu_mhz`` and ``emc_mhz``.
- ``PredictionRequest`` keeps its catalogue-wide properties and adds a ``oneOf`` of
  ``PredictionRequest.ForDevice`` (``device`` given: a ``oneOf`` of ``PredictionRequest.<device>`` with
  a ``discriminator`` on ``device``, whose mode objects carry that device's ranges) and ``PredictionRequest.WorkloadDevice`` (no ``device``: the workload's
  device, unknown to the document, so ``modes`` may only be ``"presets"`` or ``"all"`` there). The server
  also accepts mode objects without ``device`` when they lie in the workload's device's range; the
  document leaves that out (it cannot name the range), which makes it stricter than the server, never
  looser.

The row variants also carry the fit's lower bound on ``epoch_time_s``
(:data:`predictor.model.MIN_EPOCH_TIME_S`): every ``rows`` array of a request body is fitted.

Ranges are the catalogue's inclusive (min, max); the server allows
:data:`models.catalogue.RANGE_TOLERANCE_MHZ` more on clocks, so the document is the stricter of the two.
"""

from __future__ import annotations

import copy
from typing import Any

from jetpredict.api.schemas import MODE_IN_DOC, PROFILE_ROW_DOC
from jetpredict.models.catalogue import MODE_FIELDS, list_devices
from jetpredict.predictor.model import MIN_EPOCH_TIME_S

PROFILE_ROW = "ProfileRow"  # prefix of the per-device row variants
PREDICTION_REQUEST = "PredictionRequest"
#: Request-body schemas (component names) whose ``rows`` are profile rows.
ROWS_SCHEMAS = ("WorkloadRef", "ProfileUpload")


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
    """Add the per-device variants to ``schemas`` (the document's ``components.schemas``, in place)."""
    devices = list_devices()
    rows: dict[str, str] = {}
    for device in devices:
        row = _with_ranges(PROFILE_ROW_DOC, device.knob_ranges())
        row["properties"]["device"] = {"type": "string", "enum": [device.id]}
        # Rows in a request body are always fitted, and the fit refuses epoch times below this bound.
        row["properties"]["epoch_time_s"].pop("exclusiveMinimum", None)
        row["properties"]["epoch_time_s"]["minimum"] = MIN_EPOCH_TIME_S
        row["description"] = f"a profile row of {device.id} (knob ranges: that device's)"
        rows[device.id] = name = f"{PROFILE_ROW}.{device.id}"
        schemas[name] = row
    for name in ROWS_SCHEMAS:
        # The catalogue-wide row stays (readers see every field once); oneOf narrows it to the device.
        rows_prop = schemas[name]["properties"]["rows"]
        # A copy: apispec may hand out the field's metadata itself, which every app shares.
        rows_prop["items"] = items = {**copy.deepcopy(rows_prop["items"]), **_discriminated(rows)}
        items["description"] = PROFILE_ROW_DOC["description"] + "; knobs within the row's device's range"

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
