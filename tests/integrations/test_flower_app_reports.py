"""The Flower fleet example's results say what happened to every node: a node that failed mid-round is a row
whose energy is unknown (and so the round's), every arm states what its predictions rest on, and why a node
was left out reaches the results and the summary line."""

from __future__ import annotations

import pytest

pytest.importorskip("flwr", reason="the Flower example needs the [flower] extra")

from flower_fleet import task
from flower_fleet.fleet import BaselineFedAvg, ClientRound, FleetConfig, round_figures, run_arms
from flower_fleet.summary import summary_line
from flwr.app import Error, Message, RecordDict
from test_flower_app import app_grid, run_config

from jetpredict.integrations.flower.strategy import ClientRecord, failure_reason


def _row(node: int, time_s: float | None, energy_j: float | None, *, failed: bool = False,
         reason: str | None = None) -> ClientRound:
    """A client of round 1 (deadline 10 s) at base power 2 W, its time interval 4..6 s."""
    return ClientRound("plan", 1, node, "nano", 0.02, "m", time_s, energy_j, None if failed else 2.0, not failed,
                       5.0, 4.0, 6.0, 10.0, 8.0, 12.0, energy_null_reason=reason, failed=failed)


def test_a_failed_client_makes_the_rounds_energy_unknown_and_is_counted():
    rows = [_row(1, 5.0, 10.0), _row(2, None, None, failed=True, reason="training failed: out of memory")]
    (fig,) = round_figures(rows, 10.0, 1)
    assert (fig["trained"], fig["failed"], fig["aggregated"], fig["late"], fig["misses"]) == (2, 1, 1, 0, 0)
    # Not a sum over the node that did report: the failed one spent energy nobody measured.
    assert fig["train_energy_j"] is None and fig["round_energy_j"] is None and fig["energy_reported"] == 1
    assert "1 of 2 trained clients failed (training failed: out of memory)" in fig["energy_note"]
    # A failure is not a late reply dropped at the deadline: the round ends with the slowest reply.
    assert fig["round_end_s"] == pytest.approx(5.0)
    assert fig["predicted"] == fig["time_cover"] == 1  # its time is unknown: no interval to check
    line = summary_line({"arm": "plan", "rounds": [fig], "accuracy": {}, "empty_rounds": []}, 10.0)
    assert "failed 1" in line and "training energy unknown" in line and "10.0 J" not in line


def test_the_baseline_words_a_failed_reply_as_the_strategy_does(server_identity):
    sent = Message(RecordDict(), dst_node_id=2, message_type="train")
    reply = Message(Error(code=2, reason="CUDA out of memory"), reply_to=sent)
    assert failure_reason(reply) == "training failed: CUDA out of memory"
    record = ClientRecord(round=1, node_id=2, device="nano", epoch_scale=1.0, selected=True)
    record.add_report(reply)
    baseline = BaselineFedAvg()
    baseline.aggregate_train(1, [reply])
    (report,) = baseline.reports
    assert report["failed"] and not report["aggregated"] and report["node_id"] == 2
    assert record.failed and report["reason"] == record.reason == failure_reason(reply)


@pytest.mark.slow
def test_a_node_that_crashes_mid_round_stays_in_every_arms_results(lenet_models, server_identity, monkeypatch):
    cfg = FleetConfig(arms="plan,maxn", num_server_rounds=1, local_epochs=5, deadline_s=30.0, min_nodes=2)
    client_data = task.client_data

    def crashing(pid: int, n: int, *args, **kwargs):
        if pid == 1:  # node 2, a Xavier NX, in every arm's round
            raise RuntimeError("injected crash mid-round")
        return client_data(pid, n, *args, **kwargs)

    monkeypatch.setattr(task, "client_data", crashing)
    runs = {r["arm"]: r for r in run_arms(app_grid(2, run_config(cfg)), cfg, lenet_models)}
    for arm, run in runs.items():
        (row,) = [row for row in run["rows"] if row["node_id"] == 2]
        assert row["failed"] and row["energy_j"] is None and row["time_s"] is None and not row["aggregated"], arm
        assert row["energy_null_reason"].startswith("training failed:"), arm
        assert "injected crash mid-round" in row["energy_null_reason"], arm
        (fig,) = run["rounds"]
        assert (fig["trained"], fig["failed"], fig["aggregated"]) == (2, 1, 1), arm
        assert fig["train_energy_j"] is None and fig["round_energy_j"] is None, arm
        assert "1 of 2 trained clients failed (training failed:" in fig["energy_note"], arm
        line = summary_line(run, cfg.deadline_s)
        assert "failed 1" in line and "training energy unknown, to round ends unknown" in line, arm


def test_why_each_node_was_left_out_reaches_the_results_and_the_line(lenet_models, server_identity):
    cfg = FleetConfig(num_server_rounds=1, deadline_s=1e-3, min_nodes=2, arms="plan")
    (run,) = run_arms(app_grid(2, run_config(cfg)), cfg, lenet_models)
    assert run["excluded"] == {1: 2}
    # Reason -> nodes, per round: no mode of either board trains 5 local epochs in a millisecond.
    (round_,) = run["exclusions"]
    assert round_ == 1 and sorted(n for nodes in run["exclusions"][1].values() for n in nodes) == [1, 2]
    for reason in run["exclusions"][1]:
        assert reason.startswith("cannot meet the 0.001 s deadline"), reason
    line = summary_line(run, cfg.deadline_s)
    assert "left out 2 client-rounds: cannot meet the 0.001 s deadline" in line
