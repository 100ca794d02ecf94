"""Schemathesis hook: schema-valid bodies made to follow the rules the document states beyond JSON Schema.

JSON Schema cannot compare two fields of an object or two items of an array, so the OpenAPI document of
``jetpredict serve`` states those rules (stall and compute at most the epoch, an energy that is its power
x time, one set of knobs per mode label, repeats
that agree, unique client ids, a plausible minibatch time and implied power, a power cap within the
device's range) in words and in ``x-jetpredict-rules`` (see :mod:`api.openapi_doc`). This
hook reads them from the document that schemathesis is testing -- never from the server's code -- and
makes each *schema-valid* (positive) body follow them (and each positive query its exclusive parameter
pairs, ``x-jetpredict-exclusive-parameters``): parts above their whole are lowered to it; an
energy off its power x time is set to that product; a
ratio outside its range is moved to the nearer end; a cap above the device's maximum is lowered to it; an
array item that breaks an array rule is dropped (the first item is always kept, so ``minItems`` holds).
Schema-invalid (negative) cases are left alone. Then "schema-valid request rejected" means what it says:
the server refused a request that the document, read in full, allows.

Used by ``tests/api/test_api_fuzz.py`` (imported) and ``bench/api_fuzz.py`` (``SCHEMATHESIS_HOOKS``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import schemathesis

RULES = "x-jetpredict-rules"


def _resolve(doc: Mapping[str, Any], node: Mapping[str, Any]) -> Mapping[str, Any]:
    while isinstance(node, Mapping) and "$ref" in node:
        target: Any = doc
        for part in node["$ref"].lstrip("#/").split("/"):
            target = target[part.replace("~1", "/").replace("~0", "~")]
        node = target
    return node


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _same(value: object) -> object:
    """A cell as the server compares it: text stripped of white space, numbers as floats."""
    if isinstance(value, str):
        return value.strip()
    number = _number(value)
    return value if number is None else number


def _bounds(prop: Mapping[str, Any]) -> tuple[float, float]:
    """The (min, max) a number property allows (OpenAPI 3.0: ``exclusiveMinimum`` is a flag)."""
    return float(prop.get("minimum", -float("inf"))), float(prop.get("maximum", float("inf")))


def _object_rules(rules: list[Mapping[str, Any]], item: dict, props: Mapping[str, Any]) -> None:
    for rule in rules:
        if rule["rule"] == "ratio-range":
            value, per = _number(item.get(rule["field"])), _number(item.get(rule["per"]))
            also = _number(item.get(rule["per_also"])) if "per_also" in rule else 1.0
            per = None if per is None or also is None else per * also
            if value is not None and per is not None and per > 0:
                lo, hi = _bounds(props.get(rule["field"], {}))
                lo, hi = max(lo, per * rule["min"]), min(hi, per * rule["max"])
                # strictly inside, so that the server's division lands in the range too
                item[rule["field"]] = min(max(value, lo * (1 + 1e-9)), hi * (1 - 1e-9))
            continue
        if rule["rule"] == "device-max":
            *path, last = rule["field"]
            parent: Any = item
            for name in path:
                parent = parent.get(name) if isinstance(parent, Mapping) else None
            cap = _number(parent.get(last)) if isinstance(parent, Mapping) else None
            # without a device the workload's decides, which this hook cannot know: the smallest maximum
            top = rule["max"].get(item.get(rule["device"]), min(rule["max"].values()))
            if cap is not None and cap > top:
                parent[last] = top
            continue
        if rule["rule"] == "at-most":
            given = {f: v for f in rule["fields"] if (v := _number(item.get(f))) is not None}
            whole = _number(item.get(rule["than"]))
            if given and whole is not None and sum(given.values()) > rule["factor"] * whole:
                for f, v in given.items():  # shrunk in proportion: together, the whole
                    item[f] = whole * v / sum(given.values())
            continue
        if rule["rule"] == "product":
            value, factors = _number(item.get(rule["field"])), [_number(item.get(f)) for f in rule["of"]]
            if value is not None and None not in factors:
                product = 1.0
                for factor in factors:
                    product *= factor
                if not product / rule["factor"] <= value <= product * rule["factor"]:
                    item[rule["field"]] = product


def _key(rule: Mapping[str, Any], item: Mapping[str, Any]) -> tuple:
    defaults = rule.get("defaults", {})
    return tuple(_same(defaults.get(f) if item.get(f) is None else item.get(f)) for f in rule["key"])


def _admit(rule: Mapping[str, Any], item: Mapping[str, Any], seen: dict) -> tuple[bool, tuple | None]:
    """Whether ``item`` may join the items kept so far (``seen``: this rule's memory of them), and the
    ``(key, value)`` it would add to that memory (None: nothing). ``seen`` is only read: an item joins
    when every rule admits it, so the memories change after all rules agree (no copies per item)."""
    key = _key(rule, item)
    if rule["rule"] == "unique":
        return key not in seen, (key, True)
    if rule["rule"] == "same-values":
        generic = rule.get("generic", {})
        if any(str(_same(item.get(f))).lower() in map(str.lower, labels) for f, labels in generic.items()):
            return True, None
        values = tuple(_same(item.get(f)) for f in rule["values"])
        return seen.get(key, values) == values, (key, values)
    if rule["rule"] == "max-distinct":
        return key in seen or len(seen) < rule["max"], (key, True)
    if rule["rule"] == "max-ratio":
        value = _number(item.get(rule["field"]))
        if value is None or value <= 0:
            return True, None
        lo, hi = seen.get(key, (value, value))
        lo, hi = min(lo, value), max(hi, value)
        return hi <= rule["ratio"] * lo, (key, (lo, hi))
    return True, None


def _array_rules(rules: list[Mapping[str, Any]], items: list) -> list:
    memory: list[dict] = [{} for _ in rules]
    kept = []
    for item in items:
        if not isinstance(item, Mapping):
            kept.append(item)
            continue
        verdicts = [_admit(rule, item, seen) for rule, seen in zip(rules, memory, strict=True)]
        if all(ok for ok, _ in verdicts):
            for (_, entry), seen in zip(verdicts, memory, strict=True):
                if entry is not None:
                    seen[entry[0]] = entry[1]
            kept.append(item)
    return kept


def follow_rules(doc: Mapping[str, Any], node: Mapping[str, Any], value: Any) -> Any:
    """``value`` (a body or a part of it, validated by ``node``) made to follow the rules found in
    ``node`` and below it."""
    node = _resolve(doc, node)
    if not isinstance(node, Mapping):
        return value
    for alternative in (*node.get("allOf", ()), *node.get("oneOf", ()), *node.get("anyOf", ())):
        value = follow_rules(doc, alternative, value)
    rules = node.get(RULES, [])
    if isinstance(value, dict):
        for name, prop in node.get("properties", {}).items():
            if name in value:
                value[name] = follow_rules(doc, prop, value[name])
        _object_rules(rules, value, node.get("properties", {}))
    elif isinstance(value, list):
        if "items" in node:
            value = [follow_rules(doc, node["items"], item) for item in value]
        if rules:
            value = _array_rules(rules, value)
    return value


def request_body_schema(doc: Mapping[str, Any], path: str, method: str) -> Mapping[str, Any] | None:
    operation = doc.get("paths", {}).get(path, {}).get(method.lower(), {})
    body = _resolve(doc, operation.get("requestBody", {}))
    return body.get("content", {}).get("application/json", {}).get("schema")


EXCLUSIVE_PARAMETERS = "x-jetpredict-exclusive-parameters"


def follow_exclusive_parameters(operation: Mapping[str, Any], query: dict) -> dict:
    """``query`` with the second group of each of the operation's exclusive pairs left out where the first
    is given too (the document's ``x-jetpredict-exclusive-parameters``)."""
    for first, second in operation.get(EXCLUSIVE_PARAMETERS, ()):
        if any(k in query for k in first):
            query = {k: v for k, v in query.items() if k not in second}
    return query


@schemathesis.hook
def map_case(context, case):
    """Positive cases: a JSON body follows the document's ``x-jetpredict-rules``, a query its exclusive
    parameter pairs."""
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive:
        return case
    doc = case.operation.schema.raw_schema
    if isinstance(case.query, dict):
        operation = doc.get("paths", {}).get(case.operation.path, {}).get(case.method.lower(), {})
        case.query = follow_exclusive_parameters(operation, case.query)
    if not isinstance(case.body, dict | list):
        return case
    schema = request_body_schema(doc, case.operation.path, case.method)
    if schema is not None:
        case.body = follow_rules(doc, schema, case.body)
    return case
