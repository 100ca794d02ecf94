"""``GET /healthz`` (liveness and database check) and ``GET /metrics`` (Prometheus)."""

from __future__ import annotations

import functools
import logging

import sqlalchemy as sa
from flask.views import MethodView
from flask_smorest import Blueprint
from jetpredict.api.routes.common import services
from jetpredict.api.schemas import HealthSchema
from jetpredict.models.catalogue import device_ids

blp = Blueprint("health", __name__, description="Service health and metrics")
log = logging.getLogger("jetpredict.api")


@functools.cache
def _version() -> str:
    # Reading the installed metadata parses a file (~1 ms): once per process is enough.
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("jetpredict")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "unknown"


@blp.route("/healthz")
class Health(MethodView):
    @blp.response(200, HealthSchema)
    @blp.alt_response(503, schema=HealthSchema, description="the database cannot be reached")
    def get(self):
        """Liveness: the service answers and its database is reachable."""
        try:
            with services().storage.engine.connect() as conn:
                conn.execute(sa.text("SELECT 1"))
            database, status = "ok", 200
        except sa.exc.SQLAlchemyError as exc:
            log.warning("health check: database unreachable: %s", exc)
            database, status = f"unreachable: {type(exc).__name__}", 503
        body = {"status": "ok" if status == 200 else "degraded", "version": _version(),
                "database": database, "devices": len(device_ids())}
        return body, status


@blp.route("/metrics")
class PrometheusMetrics(MethodView):
    @blp.doc(responses={"200": {"description": "Prometheus text exposition format",
                                "content": {"text/plain": {"schema": {"type": "string"}}}}})
    def get(self):
        """Request counts and latencies per route, predictions served (Prometheus text format)."""
        return services().metrics.exposition()
