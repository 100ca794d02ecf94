"""The ClientApp: trains the CNN on the node's share of the digits at the power mode the strategy planned.

Node config: ``partition-id`` and ``num-partitions`` (the simulation engine sets them; a SuperNode is
given them with ``--node-config``), and optionally ``jetpredict-device`` (the Jetson type; default the
simulated fleet's ``DEVICES[partition-id % 6]``) and ``jetpredict-epoch-scale`` (default: the node's share
of the data, see ``task.py``). With run config ``simulate-jetson = true`` (the default) the round's time
and energy are the digital twin's for that device and mode; with ``false`` the node must be a Jetson:
the mode is applied and the round measured. A train message without a plan (the ``maxn`` and
``maxn-drop`` arms' plain FedAvg) runs at the device's fastest preset, on the twin and on a Jetson alike.
``jetpredict_mod`` does all of that around ``train``, which is plain Flower: it answers the strategy's
device query, applies the planned mode (or the fastest preset) and restores the previous one, measures
the round (or takes the twin's figures) and attaches them to the reply. The node's log (stderr) shows
jetpredict's node-side lines from INFO up: the planned mode of each round and what its prediction rests on.
"""

from __future__ import annotations

import logging
import sys

from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from jetpredict.integrations.flower import (
    DEVICE_KEY,
    EPOCH_SCALE_KEY,
    FASTEST_PRESET,
    TwinWorkload,
    jetpredict_mod,
)

from . import task
from .fleet import FleetConfig

#: The logger of jetpredict's node side (the mod's "planned mode ..." line, at INFO).
NODE_LOGGER = "jetpredict.integrations.flower"


class _NodeLogHandler(logging.StreamHandler):
    """Writes to the stderr of the moment (as Python's last-resort handler does), so a stream swapped after
    the app was loaded (a worker's, a test's) still gets the lines."""

    @property
    def stream(self):  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, _value: object) -> None:
        pass


def show_node_log(level: int = logging.INFO) -> None:
    """Show jetpredict's node-side lines from ``level`` on stderr, once per process: Flower sets up no
    logging for an app's own loggers, so Python would drop them below WARNING and the node's log would not
    say where its mode's prediction came from. The lines still reach any handler the host set up."""
    logger = logging.getLogger(NODE_LOGGER)
    if logger.level == logging.NOTSET or logger.level > level:
        logger.setLevel(level)
    if not any(isinstance(h, _NodeLogHandler) for h in logger.handlers):
        handler = _NodeLogHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        logger.addHandler(handler)


show_node_log()


def _partition(context: Context) -> tuple[int, int]:
    try:
        return int(context.node_config["partition-id"]), int(context.node_config["num-partitions"])
    except KeyError as missing:
        raise ValueError(f"node config needs partition-id and num-partitions; {missing} is missing "
                         "(flower-supernode --node-config 'partition-id=0 num-partitions=2')") from None


def _config(context: Context) -> FleetConfig:
    return FleetConfig.from_run_config(context.run_config)


def node_device(context: Context) -> str:
    """The node's Jetson type: node config ``jetpredict-device``, else the simulated fleet's."""
    device = context.node_config.get(DEVICE_KEY)
    return str(device) if device else task.device_of(_partition(context)[0])


def node_epoch_scale(context: Context) -> float:
    """The node's local epoch in profiled epochs: node config ``jetpredict-epoch-scale``, else its data share."""
    scale = context.node_config.get(EPOCH_SCALE_KEY)
    if scale is not None:
        return float(scale)
    cfg = _config(context)
    pid, n = _partition(context)
    return task.epoch_scale(pid, n, cfg.split, cfg.dirichlet_alpha)


def node_twin(msg: Message, context: Context) -> TwinWorkload | None:
    """The digital twin that costs this node's round (``simulate-jetson = true``), else None: measure it."""
    cfg = _config(context)
    if not cfg.simulate_jetson:
        return None
    return TwinWorkload(cfg.twin_workload, epoch_scale=node_epoch_scale(context),
                        epochs=int(msg.content["config"]["local-epochs"]))


# default_mode: the baseline arms send no plan; their nodes must still train at MAXN on real hardware (the
# twin's default is that preset already), or the arm would measure whatever mode the board was left in.
jetpredict = jetpredict_mod(device=node_device, epoch_scale=node_epoch_scale, twin=node_twin,
                            default_mode=FASTEST_PRESET)
app = ClientApp(mods=[jetpredict])
# Optional: a query.jetpredict function answers the device query at once (with the mod alone, the
# strategy asks once more through a train message that the mod answers).
jetpredict.register_query(app)


@app.train()
def train(msg: Message, context: Context) -> Message:
    """Local epochs of SGD from the global model (jetpredict_mod runs it at the planned power mode)."""
    cfg = _config(context)
    pid, n = _partition(context)
    config = msg.content["config"]
    epochs = int(config["local-epochs"])
    x, y = task.client_data(pid, n, cfg.split, cfg.dirichlet_alpha)
    model = task.Net()
    model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    # A seed per (run seed, round, client): reruns are reproducible, clients differ.
    loss = task.train_local(model, x, y, epochs, seed=int(config["seed"]) * 100_003
                            + int(config["server-round"]) * 1_009 + pid)
    content = RecordDict({"arrays": ArrayRecord(model.state_dict()),
                          "metrics": MetricRecord({"train-loss": loss, "num-examples": len(x)})})
    return Message(content, reply_to=msg)
