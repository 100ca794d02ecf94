"""The Flower fleet example deployed: a SuperLink and two SuperNodes (insecure, loopback only) started here,
the app submitted with ``flwr run``; each SuperNode's node config carries its Jetson type."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("flwr", reason="the Flower example needs the [flower] extra")

from flower_fixtures import (  # noqa: E402
    EXAMPLE_APP,
    FlowerProcesses,
    energy_to_deadline_j,
    free_port,
    needs_flower_tools,
    save_models,
)
from flower_fleet import task  # noqa: E402

pytestmark = pytest.mark.slow  # starts processes or servers (see README: the fast pass)

#: How long the run may take once submitted (s); about a minute on 2 busy cores.
RUN_LIMIT_S = 240.0
#: Partition p runs on a SuperNode whose node config says NODE_DEVICES[p]: the reverse of the simulated
#: fleet's round-robin (task.device_of(p)), the two types the models are fitted for. The set of types is the
#: same either way, so the test checks each row's (type, partition) pair: a node that ignored its
#: jetpredict-device would report its partition with the other type.
NODE_DEVICES = ("xavier-nx", "agx-xavier")


@needs_flower_tools
@pytest.mark.timeout(420)
def test_the_app_runs_under_a_local_superlink_with_two_supernodes(tmp_path, lenet_models):
    link_port = free_port()
    flower = FlowerProcesses(tmp_path, link_port)
    models = save_models(lenet_models, tmp_path / "models")
    results = tmp_path / "results.json"
    try:
        flower.start_superlink()
        for p, device in enumerate(NODE_DEVICES):
            port = free_port()
            flower.start(f"node{p}", ["flower-supernode", "--insecure", "--superlink", f"127.0.0.1:{link_port}",
                                      "--host", "127.0.0.1", "--port", str(port), "--node-config",
                                      f'partition-id={p} num-partitions=2 jetpredict-device="{device}"'], port)
        flower.run_app(EXAMPLE_APP, f'arms="plan,maxn-drop" num-server-rounds=1 min-nodes=2 deadline-s=30.0 '
                                    f'query-timeout-s=120.0 models="{models}" results-out="{results}"',
                       results, RUN_LIMIT_S)
    finally:
        flower.stop()
    arms = {a["arm"]: a for a in json.loads(results.read_text())["arms"]}
    # A row carries no partition id, but its epoch scale is its partition's share of the data (task.py).
    scales = {device: task.epoch_scale(p, len(NODE_DEVICES)) for p, device in enumerate(NODE_DEVICES)}
    assert [task.device_of(p) for p in range(len(NODE_DEVICES))] == list(reversed(NODE_DEVICES))
    assert abs(scales[NODE_DEVICES[0]] / scales[NODE_DEVICES[1]] - 1) > 0.05  # the pairs tell partitions apart
    assert set(arms) == {"plan", "maxn-drop"}
    for arm, run in arms.items():
        assert run["empty_rounds"] == [] and run["rounds"][0]["trained"] == 2, arm
        assert run["rounds"][0]["late"] == 0, arm
        assert sorted(row["device"] for row in run["rows"]) == sorted(NODE_DEVICES), arm
        for row in run["rows"]:  # each node's type is its own node config's, not the round-robin fallback's
            assert row["epoch_scale"] == pytest.approx(scales[row["device"]]), (arm, row["device"])
        for row in run["rows"]:
            assert row["pred_time_s_low"] <= row["pred_time_s"] <= row["pred_time_s_high"]
            assert row["time_s"] <= 30.0
    plan_modes = {row["mode"] for row in arms["plan"]["rows"]}
    assert plan_modes.isdisjoint({row["mode"] for row in arms["maxn-drop"]["rows"]})  # planned, not MAXN

    assert energy_to_deadline_j(arms["plan"]["rows"], 30.0) < energy_to_deadline_j(arms["maxn-drop"]["rows"], 30.0)
