"""Flower's Grid interface over ClientApps in this process, and a planned train message as a SuperNode
receives it (imported only by tests that have flwr)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Context, Error, Message, Metadata, RecordDict
from flwr.serverapp import Grid
from jetpredict.models.catalogue import PowerMode

from jetpredict.integrations.flower import PLAN_RECORD, ClientPlan

#: The board the client tests' plans name by default.
DEVICE = "orin-nx"


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


def plan_for(mode: PowerMode, device: str = DEVICE) -> ClientPlan:
    """Node 7's plan for ``mode``: 2 epochs at half scale, 10 s (8-12 s) and 100 J (80-125 J) predicted."""
    return ClientPlan(node_id=7, device=device, epoch_scale=0.5, epochs=2, deadline_s=60.0, meets_deadline=True,
                      mode=mode.mode, cpu_cores=int(mode.cpu_cores), cpu_mhz=float(mode.cpu_mhz),
                      gpu_mhz=float(mode.gpu_mhz), emc_mhz=float(mode.emc_mhz), time_s=10.0, time_s_low=8.0,
                      time_s_high=12.0, energy_j=100.0, energy_j_low=80.0, energy_j_high=125.0,
                      idle_energy_j=20.0, avg_power_w=10.0)


def train_message(plan: ClientPlan | None, message_type: str = "train") -> Message:
    """A train message as a SuperNode receives it (metadata given: no ServerApp run in this process)."""
    content = RecordDict({"config": ConfigRecord({"server-round": 3})})
    if plan is not None:
        content[PLAN_RECORD] = plan.to_config()
    return Message(content=content, metadata=Metadata(
        run_id=1, message_id="m-1", src_node_id=0, dst_node_id=7, reply_to_message_id="", group_id="3",
        created_at=0.0, ttl=3600.0, message_type=message_type))
