"""Request lists with a count bound: the count is checked before any item, and one 422 names a bounded
number of items' problems (:class:`BoundedList`; the modes field of predictions uses the same rules)."""

from __future__ import annotations

from marshmallow import ValidationError, fields, utils, validate

#: Items of one request list whose problems a 422 names one by one; the list's own message counts the rest
#: (a list of 10,000 bad clients answered 23 MB naming every missing field).
MAX_LISTED_ITEM_ERRORS = 100


def count_problem(count: int, low: int | None, high: int | None, noun: str) -> str | None:
    """Why a list of ``count`` items breaks its bounds ``low``..``high`` (None: unbounded on that side),
    ``noun`` naming its items; None when it keeps them."""
    if (low is None or count >= low) and (high is None or count <= high):
        return None
    rule = f"{low}..{high}" if low is not None and high is not None else (
        f"at least {low}" if high is None else f"at most {high}")
    return f"must hold {rule} {noun}, got {count}"


def capped_item_errors(errors: dict[int, object], failed: int, noun: str) -> dict | list:
    """A list's per-item ``errors`` (the first :data:`MAX_LISTED_ITEM_ERRORS` items with problems kept)
    and, where ``failed`` items had problems in all, one message on the list counting those not listed."""
    kept = dict(sorted(errors.items())[:MAX_LISTED_ITEM_ERRORS]) if len(errors) > MAX_LISTED_ITEM_ERRORS \
        else errors
    if failed <= len(kept):
        return kept
    return [kept, f"{failed - len(kept)} more {noun} have problems, not listed (the first "
                  f"{MAX_LISTED_ITEM_ERRORS} with problems are)"]


class BoundedList(fields.List):
    """A request list whose ``validate.Length`` bounds (the ones the document states as minItems and
    maxItems) are checked before any item: a list past them is refused by its count alone, its items never
    loaded (marshmallow loads every item first: 6.6M clients took 8.4 GB). A 422 names the problems of at
    most :data:`MAX_LISTED_ITEM_ERRORS` items and counts the rest. ``noun``: what the items are, for the
    messages."""

    def __init__(self, cls_or_instance, *, noun: str, **kwargs) -> None:
        super().__init__(cls_or_instance, **kwargs)
        self.noun = noun
        self.bounds = [(v.min, v.max) for v in self.validators if isinstance(v, validate.Length)]

    def _deserialize(self, value, attr, data, **kwargs) -> list:
        if not utils.is_collection(value):
            raise self.make_error("invalid")
        for low, high in self.bounds:
            if problem := count_problem(len(value), low, high, self.noun):
                raise ValidationError(problem)
        result: list = []
        errors: dict[int, object] = {}
        failed = 0
        for index, item in enumerate(value):
            try:
                result.append(self.inner.deserialize(item, **kwargs))
            except ValidationError as exc:
                if exc.valid_data is not None:
                    result.append(exc.valid_data)
                failed += 1
                if failed <= MAX_LISTED_ITEM_ERRORS:  # the rest are counted, not kept
                    errors[index] = exc.messages
        if errors:
            raise ValidationError(capped_item_errors(errors, failed, self.noun), valid_data=result)
        return result
