"""Prometheus metrics: requests and latency per route, predictions served, workload fits.

Each app gets its own registry (tests build many apps). Under gunicorn with several workers, set
``PROMETHEUS_MULTIPROC_DIR`` (``jetpredict serve`` does) and ``/metrics`` aggregates all workers.
"""

from __future__ import annotations

import math
import os
import time

from flask import Flask, Response, g, request
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest

#: Latency buckets in s: the service answers most requests in milliseconds.
LATENCY_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
#: The methods of RFC 9110 and PATCH (RFC 5789), labelled as they are; any other a client makes up is
#: labelled :data:`OTHER_METHOD`, or each new name would add series to /metrics for good.
KNOWN_METHODS = frozenset(("GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"))
OTHER_METHOD = "other"


def request_elapsed_s() -> float:
    """Seconds since this request began (the one start time the latency metric and the access log
    share); NaN outside a request the metrics saw begin."""
    start = g.get("request_start_s")
    return time.perf_counter() - start if start is not None else float("nan")


class Metrics:
    """The metrics of one app."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter("jetpredict_http_requests_total", "HTTP requests by route, method and status",
                                ("route", "method", "status"), registry=self.registry)
        self.latency = Histogram("jetpredict_http_request_duration_seconds",
                                 "HTTP request latency in seconds by route and method", ("route", "method"),
                                 buckets=LATENCY_BUCKETS_S, registry=self.registry)
        self.predictions = Counter("jetpredict_predictions_total",
                                   "Power-mode predictions served (one per mode)", ("endpoint",),
                                   registry=self.registry)
        self.heavy_rejected = Counter("jetpredict_heavy_rejected_total",
                                      "Heavy requests answered 503 because the heavy-work gate was full",
                                      registry=self.registry)
        self.fits = Counter("jetpredict_workload_fits_total", "Workload models fitted", ("kind",),
                            registry=self.registry)
        self._served: dict[str, Counter] = {}

    def served(self, endpoint: str) -> Counter:
        """The child of :attr:`predictions` for ``endpoint`` (looked up once: ``labels()`` costs ~1 us)."""
        child = self._served.get(endpoint)
        if child is None:
            child = self._served[endpoint] = self.predictions.labels(endpoint)
        return child

    def init_app(self, app: Flask) -> None:
        app.extensions["jetpredict_metrics"] = self
        # (route, method, status) of matched routes -> (request counter, latency histogram) children: a
        # request pays two dict lookups, not two labels() calls (finite: routes x their methods x statuses).
        children: dict[tuple[str, str, int], tuple[Counter, Histogram]] = {}

        @app.before_request
        def _start() -> None:
            g.request_start_s = time.perf_counter()

        @app.after_request
        def _observe(response: Response) -> Response:
            req = request._get_current_object()  # one context lookup, not one per attribute
            rule = req.url_rule
            route = rule.rule if rule is not None else "<unmatched>"
            method = req.method if req.method in KNOWN_METHODS else OTHER_METHOD
            key = (route, method, response.status_code)
            pair = children.get(key) if rule is not None else None
            if pair is None:
                pair = (self.requests.labels(route, method, str(response.status_code)),
                        self.latency.labels(route, method))
                if rule is not None:
                    children[key] = pair
            pair[0].inc()
            elapsed_s = request_elapsed_s()
            if not math.isnan(elapsed_s):  # the request's start was seen
                pair[1].observe(elapsed_s)
            return response

    def exposition(self) -> Response:
        """The text exposition format, aggregated over worker processes when running multi-process."""
        registry = self.registry
        if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            from prometheus_client import multiprocess

            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry)
        return Response(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
