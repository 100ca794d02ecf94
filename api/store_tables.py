"""The tables of :mod:`api.storage` (SQLAlchemy Core) and the format version they are kept in."""

from __future__ import annotations

import sqlalchemy as sa
from jetpredict.api.config import MAX_WORKLOAD_ID_CHARS

metadata = sa.MetaData()

#: The tables' format, in :data:`meta` (key ``format``): raise it when a change would mislead an older version.
#: A database without it (older, same columns) is stamped; a newer one refused
#: (:meth:`api.storage.Storage.create_schema`).
FORMAT_VERSION = 1
meta = sa.Table("jetpredict_meta", metadata, sa.Column("key", sa.String(64), primary_key=True),
                sa.Column("value", sa.String(200), nullable=False))

workloads = sa.Table(
    "workloads", metadata,
    sa.Column("id", sa.String(MAX_WORKLOAD_ID_CHARS), primary_key=True),
    sa.Column("device", sa.String(32), nullable=False),
    sa.Column("revision", sa.Integer, nullable=False),
    sa.Column("rows_stored", sa.Integer, nullable=False),
    sa.Column("fit", sa.JSON, nullable=False),  # summary of the last fit (model_version, ...)
    sa.Column("created_at", sa.String(40), nullable=False),
    sa.Column("updated_at", sa.String(40), nullable=False),
)

uploads = sa.Table(
    "uploads", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("workload_id", sa.String(MAX_WORKLOAD_ID_CHARS), sa.ForeignKey("workloads.id", ondelete="CASCADE"),
              nullable=False, index=True),
    sa.Column("revision", sa.Integer, nullable=False),
    sa.Column("rows", sa.Integer, nullable=False),
    sa.Column("sha256", sa.String(64), nullable=False),
    sa.Column("created_at", sa.String(40), nullable=False),
)

profile_rows = sa.Table(
    "profile_rows", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("workload_id", sa.String(MAX_WORKLOAD_ID_CHARS), sa.ForeignKey("workloads.id", ondelete="CASCADE"),
              nullable=False, index=True),
    sa.Column("upload_id", sa.Integer, sa.ForeignKey("uploads.id", ondelete="CASCADE"), nullable=False),
    sa.Column("data", sa.JSON, nullable=False),  # one validated profile row (NaN stored as null)
)


#: The last revision of each deleted workload id. An id uploaded again continues from it, so a revision never
#: names two states of one id (cached models and clients' copies are checked by revision alone). Added to
#: deployed databases by ``create_schema`` (``create_all`` adds missing tables).
deleted_revisions = sa.Table(
    "deleted_revisions", metadata,
    sa.Column("workload_id", sa.String(MAX_WORKLOAD_ID_CHARS), primary_key=True),
    sa.Column("revision", sa.Integer, nullable=False),
)


#: One row per workload of an upload (:class:`api.storage.IdempotencyKey`; columns as before uploads held several
#: workloads), holding the hash of the request and the answer (whole under the first key) replayed to a retry.
idempotency = sa.Table(
    "idempotency", metadata,
    sa.Column("key", sa.String(240), primary_key=True),
    sa.Column("workload_id", sa.String(MAX_WORKLOAD_ID_CHARS), sa.ForeignKey("workloads.id", ondelete="CASCADE"),
              nullable=False, index=True),
    sa.Column("request_sha256", sa.String(64), nullable=False),
    sa.Column("response", sa.JSON, nullable=False),
    sa.Column("created_at", sa.String(40), nullable=False),
)
