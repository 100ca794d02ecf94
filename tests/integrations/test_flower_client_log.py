"""A node's own log says where the prediction of its planned mode came from, as the Flower example's README
promises: under the default log levels (no caplog.at_level, no logging set up by the test), the example's
ClientApp writes jetpredict's node-side line to stderr."""

from __future__ import annotations

import pytest

pytest.importorskip("flwr", reason="the Flower example needs the [flower] extra")

from flower_fleet import client_app, task
from flower_grid import plan_for, train_message
from flwr.app import ArrayRecord, ConfigRecord, Context, RecordDict
from jetpredict.models.catalogue import PowerMode, load_device


def test_the_examples_node_logs_where_its_planned_modes_prediction_came_from(capsys):
    maxn = load_device("orin-nx").maxn
    mode = PowerMode(maxn.mode, maxn.cpu_cores, maxn.cpu_mhz, maxn.gpu_mhz, maxn.emc_mhz)
    plan = plan_for(mode)
    plan.epochs = 1  # the round's local-epochs below: the twin costs the plan's work
    plan.workload_source, plan.reference_source, plan.profiled_modes = "simulated", "published", 4
    context = Context(run_id=1, node_id=7, state=RecordDict(), run_config={},
                      node_config={"partition-id": 0, "num-partitions": 2, "jetpredict-device": "orin-nx"})
    plan.epoch_scale = client_app.node_epoch_scale(context)  # as its device query answered: the twin's work
    message = train_message(plan)
    message.content["arrays"] = ArrayRecord(task.Net().state_dict())
    message.content["config"] = ConfigRecord({"server-round": 3, "local-epochs": 1, "seed": 0})
    reply = client_app.app(message, context)
    assert not reply.has_error()
    err = capsys.readouterr().err
    assert f"jetpredict: planned mode {maxn.mode} on orin-nx; its prediction rests on" in err, err
    assert "workload_source=simulated" in err and "reference_source=published" in err and "profiled_modes=4" in err
