"""Flower's Grid interface over ClientApps in this process (imported only by tests that have flwr)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Context, Error, Message, RecordDict
from flwr.serverapp import Grid


def node_contexts(node_ids: Iterable[int], node_config: Callable[[int], dict], run_config: dict | None = None
                  ) -> dict[int, Context]:
    """One fresh Context per node id, with that node's config."""
    return {n: Context(run_id=1, node_id=n, node_config=node_config(n), state=RecordDict(),
                       run_config=dict(run_config or {})) for n in node_ids}


class InProcessGrid(Grid):
    """Hands each message to ``app`` with its node's Context; ``silent`` nodes never answer; ``sent`` holds
    every message sent. An exception of the app becomes an error reply, as a SuperNode sends it."""

    def __init__(self, app: Callable[[Message, Context], Message], contexts: Mapping[int, Context],
                 silent: Iterable[int] = ()) -> None:
        self.app = app
        self.contexts = dict(contexts)
        self.silent = set(silent)
        self.sent: list[Message] = []

    def set_run(self, run_id: int) -> None:
        raise NotImplementedError

    @property
    def run(self):
        raise NotImplementedError

    def create_message(self, content, message_type, dst_node_id, group_id, ttl=None):
        raise NotImplementedError

    def get_node_ids(self) -> Iterable[int]:
        return list(self.contexts)

    def push_messages(self, messages):
        raise NotImplementedError

    def pull_messages(self, message_ids):
        raise NotImplementedError

    def send_and_receive(self, messages, *, timeout=None):
        messages = list(messages)
        self.sent += messages
        return [self._answer(m) for m in messages if m.metadata.dst_node_id not in self.silent]

    def _answer(self, message: Message) -> Message:
        try:
            return self.app(message, self.contexts[message.metadata.dst_node_id])
        except Exception as ex:  # what flwr's ClientApp runtime replies (ErrorCode.CLIENT_APP_RAISED_EXCEPTION)
            return Message(Error(code=2, reason=str(type(ex)) + ":<'" + str(ex) + "'>"), reply_to=message)


def configure(strategy, grid: Grid, server_round: int = 1) -> list[Message]:
    """The train messages ``strategy`` sends ``grid``'s nodes in ``server_round`` (placeholder arrays)."""
    return list(strategy.configure_train(server_round, ArrayRecord([np.zeros(3)]), ConfigRecord(), grid))
