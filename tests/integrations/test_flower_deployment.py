"""The Flower fleet example deployed as its README's "Under a SuperLink with SuperNodes" says: a SuperLink and
the README's SuperNodes (insecure, loopback only) started here with the README's node configs, the app
submitted with ``flwr run`` and the README's run config; each SuperNode's node config carries its Jetson type."""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor

import pytest
from readme_tours import FLOWER_README, sh_blocks

pytest.importorskip("flwr", reason="the Flower example needs the [flower] extra")

from flower_fixtures import (
    APP_TEST_DEADLINE_S,
    EXAMPLE_APP,
    FlowerProcesses,
    energy_to_deadline_j,
    free_port,
    needs_flower_tools,
    save_models,
)
from flower_fleet import task

pytestmark = pytest.mark.slow  # starts processes or servers (see README: the fast pass)

#: How long the run may take once submitted (s); about a minute on 2 busy cores.
RUN_LIMIT_S = 240.0


def readme_layout() -> tuple[list[str], str]:
    """The README's deployment: each SuperNode's ``--node-config`` and the ``flwr run``'s ``--run-config``."""
    script = "\n".join(sh_blocks("Under a SuperLink with SuperNodes (insecure, loopback only)", FLOWER_README))
    node_configs = re.findall(r"flower-supernode .*?--node-config '([^']*)'", script, re.S)
    return node_configs, re.search(r"flwr run .* --run-config '([^']*)'", script).group(1)


@needs_flower_tools
@pytest.mark.timeout(420)
def test_the_app_runs_under_a_local_superlink_with_the_readmes_supernodes(tmp_path):
    from flower_fleet.fleet import fit_fleet_models

    node_configs, run_config = readme_layout()
    devices = [re.search(r'jetpredict-device="([^"]+)"', c).group(1) for c in node_configs]
    assert len(devices) == 2 and "min-nodes=2" in run_config  # what the checks below take as given
    # A node that ignored its jetpredict-device would be the round-robin fallback's type, task.device_of(p):
    # the README's types are other ones, so each row's type says which node config its node read.
    assert all(task.device_of(p) != device for p, device in enumerate(devices))
    link_port = free_port()
    flower = FlowerProcesses(tmp_path, link_port)
    results = tmp_path / "results.json"
    try:
        with ThreadPoolExecutor(len(node_configs)) as pool:
            # The README starts its processes at once (`&`): here the SuperLink first (the SuperNodes connect
            # to it), then both SuperNodes together, each waited for until it listens. Leaving the block waits
            # for every start, even a failed one, so stop() below sees every process started.
            link = pool.submit(flower.start_superlink)
            # Fitted here for the README's types (1.6 s) rather than by the ServerApp for all six, while the
            # SuperLink boots in its own process.
            models = save_models(fit_fleet_models(seed=0, devices=devices), tmp_path / "models")
            link.result()
            # The README's ports 9100-9102 may be taken: free ones instead, distinct (neither node listens yet).
            ports = {link_port}
            while len(ports) <= len(node_configs):
                ports.add(free_port())
            nodes = [pool.submit(flower.start, f"node{i}", [
                "flower-supernode", "--insecure", "--superlink", f"127.0.0.1:{link_port}", "--host", "127.0.0.1",
                "--port", str(port), "--node-config", config], port)
                for i, (config, port) in enumerate(zip(node_configs, sorted(ports - {link_port}), strict=True), 1)]
            for node in nodes:
                node.result()
        # The README's run config, and where the models are and the results go; one round of the default 3
        # keeps the test near a minute. At the default deadline (10 s) the nano's planned time's upper end at
        # the default confidence (0.999) misses it, so the plan trains only the Orin NX: the test's 30 s lets
        # both arms train both nodes, which the checks below compare.
        flower.run_app(EXAMPLE_APP, f'{run_config} num-server-rounds=1 deadline-s={APP_TEST_DEADLINE_S} models="{models}" '
                                    f'results-out="{results}"', results, RUN_LIMIT_S)
    finally:
        flower.stop()
    arms = {a["arm"]: a for a in json.loads(results.read_text())["arms"]}
    # A row carries no partition id, but its epoch scale is its partition's share of the data (task.py).
    scales = {device: task.epoch_scale(p, len(devices)) for p, device in enumerate(devices)}
    assert abs(scales[devices[0]] / scales[devices[1]] - 1) > 0.05  # the pairs tell partitions apart
    assert set(arms) == {"plan", "maxn-drop"}
    for arm, run in arms.items():
        assert run["empty_rounds"] == [] and run["rounds"][0]["trained"] == 2, arm
        assert run["rounds"][0]["late"] == 0, arm
        assert sorted(row["device"] for row in run["rows"]) == sorted(devices), arm
        for row in run["rows"]:  # each node's type is its own node config's, not the round-robin fallback's
            assert row["epoch_scale"] == pytest.approx(scales[row["device"]]), (arm, row["device"])
        for row in run["rows"]:
            assert row["pred_time_s_low"] <= row["pred_time_s"] <= row["pred_time_s_high"]
            assert row["time_s"] <= APP_TEST_DEADLINE_S
    plan_modes = {row["mode"] for row in arms["plan"]["rows"]}
    assert plan_modes.isdisjoint({row["mode"] for row in arms["maxn-drop"]["rows"]})  # planned, not MAXN

    assert (energy_to_deadline_j(arms["plan"]["rows"], APP_TEST_DEADLINE_S)
            < energy_to_deadline_j(arms["maxn-drop"]["rows"], APP_TEST_DEADLINE_S))
