"""CLI verb ``serve``."""

from __future__ import annotations

import argparse


def _not_ready(args: argparse.Namespace) -> int:
    raise NotImplementedError(args.verb)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="run the HTTP service")
    p.add_argument("--host", default=None, help="default 127.0.0.1 (JETPREDICT_HOST)")
    p.add_argument("--port", type=int, default=None, help="default 8080 (JETPREDICT_PORT)")
    p.set_defaults(handler=_not_ready)
