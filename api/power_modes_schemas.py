"""Marshmallow schemas of ``GET /v1/devices/{device}/power-modes``: its query (a space and a window, each
nameable two ways) and its page. Shared fields and the mode objects are in :mod:`jetpredict.api.schemas`."""

from __future__ import annotations

from jetpredict.api.schemas import (
    DEFAULT_PAGE_SIZE,
    MAX_OFFSET,
    MAX_POWER_MODES_PAGE,
    PowerModeSchema,
    QuerySchema,
)
from jetpredict.models.catalogue import POWER_MODE_SPACES
from marshmallow import Schema, ValidationError, fields, post_load, validate, validates_schema

#: Query parameters of the power-modes listing that say one thing two ways (the CLI's and the predictions
#: body's ``modes``; 1-based pages as flask-smorest pages): one of each pair at most.
POWER_MODES_SYNONYMS = ((("space",), ("modes",)), (("limit", "offset"), ("page", "page_size")))
#: The space listed when the request names none (the first of POWER_MODE_SPACES, as in the CLI).
DEFAULT_SPACE = POWER_MODE_SPACES[0]
#: The last page: any page up to it, at any page size the schema takes, starts within MAX_OFFSET modes. A
#: bound on the pair (page - 1) x page_size would hold too, but no OpenAPI document can state one, so a client
#: built from the document could send a request that reads valid and be refused (the fuzz bench found one).
MAX_PAGE = MAX_OFFSET // MAX_POWER_MODES_PAGE + 1


def _documented(default: object, description: str) -> dict:
    """Field metadata stating ``default`` in the document only: the schema leaves an absent parameter
    absent, so :meth:`PowerModesQuerySchema._one_way_each` sees which of a pair the request gave."""
    return {"default": default, "description": description}


class PowerModesQuerySchema(QuerySchema):
    """The space (``space`` or ``modes``) and the window (``limit``/``offset``, or ``page``/``page_size``);
    loads to ``space``, ``limit``, ``offset`` and, for a window given by page, ``page`` and ``page_size``."""

    space = fields.String(validate=validate.OneOf(POWER_MODE_SPACES),
                          metadata=_documented(DEFAULT_SPACE, "presets, or all custom modes (paged)"))
    modes = fields.String(validate=validate.OneOf(POWER_MODE_SPACES), metadata=_documented(
        DEFAULT_SPACE, "the same as space (the CLI's `devices --modes`); not both"))
    limit = fields.Integer(validate=validate.Range(1, MAX_POWER_MODES_PAGE),
                           metadata=_documented(DEFAULT_PAGE_SIZE, "modes in the page"))
    offset = fields.Integer(validate=validate.Range(0, MAX_OFFSET),
                            metadata=_documented(0, "modes skipped before the page"))
    page = fields.Integer(validate=validate.Range(1, MAX_PAGE), metadata=_documented(
        1, "the page, from 1: offset (page - 1) * page_size; not with limit/offset"))
    page_size = fields.Integer(validate=validate.Range(1, MAX_POWER_MODES_PAGE), metadata=_documented(
        DEFAULT_PAGE_SIZE, "modes per page; not with limit/offset"))

    @validates_schema
    def _one_way_each(self, data: dict, **kwargs) -> None:
        errors = {}
        for one, other in POWER_MODES_SYNONYMS:
            given = [k for k in (*one, *other) if k in data]
            if any(k in data for k in one) and any(k in data for k in other):
                rule = (f"give {' and '.join(one)} or {' and '.join(other)}, not both "
                        f"(given: {', '.join(given)})")
                errors.update({k: [rule] for k in given})
        if errors:
            raise ValidationError(errors)

    @post_load
    def _window(self, data: dict, **kwargs) -> dict:
        out = {"space": data.get("space", data.get("modes", DEFAULT_SPACE))}
        if "page" in data or "page_size" in data:
            page, size = data.get("page", 1), data.get("page_size", DEFAULT_PAGE_SIZE)
            return {**out, "page": page, "page_size": size, "limit": size, "offset": (page - 1) * size}
        return {**out, "limit": data.get("limit", DEFAULT_PAGE_SIZE), "offset": data.get("offset", 0)}


class PowerModePageSchema(Schema):
    device = fields.String(required=True)
    space = fields.String(required=True)
    total = fields.Integer(required=True)
    limit = fields.Integer(required=True, metadata={"description": "modes in the page at most"})
    offset = fields.Integer(required=True, metadata={"description": "modes before the page"})
    page = fields.Integer(metadata={"description": "the page asked for (from 1); only when asked by page"})
    page_size = fields.Integer(metadata={"description": "= limit; only when asked by page"})
    modes = fields.List(fields.Nested(PowerModeSchema), required=True)
