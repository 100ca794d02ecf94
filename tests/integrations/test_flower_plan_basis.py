"""What cached plans rest on (:meth:`FleetPlanner.basis`): a stored workload refitted between two rounds
reaches the very next round's plans; with no refit the planner is not asked again, past PLAN_CACHE_ROUNDS
too; a basis that cannot be read keeps the plans one more round; a planner that cannot say keeps the age
rule. HttpPlanner's basis is read from the real service (the Flask app in a thread)."""

from __future__ import annotations

import pytest

pytest.importorskip("flwr", reason="the Flower integration needs the [flower] extra")

from jetpredict.client import Client, ConnectionFailed
from jetpredict.integrations.flower import HttpPlanner, LocalPlanner, NodeInfo, PlannerError, plan_nodes
from jetpredict.integrations.flower.plans import PLAN_CACHE_ROUNDS
from tools.testing import published_rows

NODES = [NodeInfo(1, "agx-xavier", 0.01), NodeInfo(2, "agx-xavier", 0.02)]
DEADLINE_S = 60.0


class Counted:
    """Counts an HttpPlanner's fleet plans and workload listings; ``fail``: what the listing raises."""

    def __init__(self, planner: HttpPlanner) -> None:
        self.plans: list[float] = []
        self.listings: list[str | None] = []
        self.fail: Exception | None = None
        fleet_plans, workloads = planner.client.fleet_plans, planner.client.workloads

        def counted_plans(workload, clients, deadline_s, **kwargs):
            self.plans.append(deadline_s)
            return fleet_plans(workload, clients, deadline_s, **kwargs)

        def counted_listing(search=None, limit=None, offset=0):
            self.listings.append(search)
            if self.fail is not None:
                raise self.fail
            return workloads(search=search, limit=limit, offset=offset)

        planner.client.fleet_plans = counted_plans
        planner.client.workloads = counted_listing


@pytest.fixture
def uploader(service_url) -> Client:
    return Client(service_url, api_key="k")


def _stored_and_counted(service_url, uploader) -> tuple[HttpPlanner, Counted]:
    """``my-resnet`` stored (4 published rows) and an HttpPlanner of it whose requests are counted."""
    uploader.upload_profiles(published_rows(as_id="my-resnet"))
    planner = HttpPlanner(service_url, "my-resnet")
    return planner, Counted(planner)


def test_an_upload_between_two_rounds_reaches_the_next_rounds_plans(service_url, uploader):
    planner, counted = _stored_and_counted(service_url, uploader)
    cache: dict = {}
    plan_nodes(planner, NODES, DEADLINE_S, 1, cache)
    plan_nodes(planner, NODES, DEADLINE_S, 1, cache)
    assert len(counted.plans) == 2  # two planning scales, asked once
    assert counted.listings == ["my-resnet", "my-resnet"]  # one light read per round
    uploader.upload_profiles(published_rows(as_id="my-resnet", n=10)[4:])  # a refit mid-run
    refitted = plan_nodes(planner, NODES, DEADLINE_S, 1, cache)
    assert len(counted.plans) == 4  # the very next round asks again
    # ... and gets what a planner started after the refit plans.
    assert refitted == plan_nodes(HttpPlanner(service_url, "my-resnet"), NODES, DEADLINE_S, 1)


def test_with_no_refit_the_service_is_not_asked_again_past_the_age_limit(service_url, uploader):
    planner, counted = _stored_and_counted(service_url, uploader)
    cache: dict = {}
    first = plan_nodes(planner, NODES, DEADLINE_S, 1, cache)
    for _ in range(PLAN_CACHE_ROUNDS + 2):
        assert plan_nodes(planner, NODES, DEADLINE_S, 1, cache) == first
    assert len(counted.plans) == 2 and len(counted.listings) == PLAN_CACHE_ROUNDS + 3


def test_the_exact_id_is_read_among_the_ids_containing_it(service_url, uploader):
    uploader.upload_profiles(published_rows(as_id="MY-RESNET-2"))
    uploader.upload_profiles(published_rows(as_id="my-resnet"))
    planner = HttpPlanner(service_url, "my-resnet")
    before = planner.basis()
    uploader.upload_profiles(published_rows(as_id="MY-RESNET-2", n=10)[4:])  # found by the search, not the planner's
    assert planner.basis() == before
    uploader.upload_profiles(published_rows(as_id="my-resnet", n=10)[4:])
    assert planner.basis() != before


def test_a_refit_under_a_new_model_version_is_a_new_basis(service_url, uploader):
    """A service upgraded in place refits a stored workload under its new model version, the workload's
    revision unchanged: plans that rest on the old fit are asked for again."""
    uploader.upload_profiles(published_rows(as_id="my-resnet"))
    planner = HttpPlanner(service_url, "my-resnet")
    before = planner.basis()
    listing = planner.client.workloads

    def upgraded(search=None, limit=None, offset=0):
        page = listing(search=search, limit=limit, offset=offset)
        return {**page, "workloads": [{**w, "fits": [{**f, "model_version": f"{f['model_version']}-next"}
                                                     for f in w["fits"]]} for w in page["workloads"]]}

    planner.client.workloads = upgraded
    after = planner.basis()
    ((_, (revision, _)),) = before
    assert after != before and after[0][1][0] == revision


def test_the_exact_id_is_found_past_a_page_of_ids_containing_it(service_url, uploader, monkeypatch):
    from jetpredict.integrations.flower import planners

    for workload in ("a-my-resnet", "b-my-resnet", "my-resnet"):  # listed in this order, by id
        uploader.upload_profiles(published_rows(as_id=workload))
    monkeypatch.setattr(planners, "BASIS_PAGE", 1)
    planner = HttpPlanner(service_url, "my-resnet")
    counted = Counted(planner)
    basis = planner.basis()
    ((workload_id, (revision, *_)),) = basis
    assert workload_id == "my-resnet" and revision == 1 and len(counted.listings) == 3  # third page
    monkeypatch.setattr(planners, "BASIS_PAGE", 100)
    assert planner.basis() == basis and len(counted.listings) == 4


def test_an_id_no_upload_can_store_has_no_revision_and_no_failure(service_url):
    planner = HttpPlanner(service_url, {"nano": "a/b", "*": "x" * 201})  # a blank id is refused when built
    assert planner.basis() == (("a/b", None), ("x" * 201, None))


def test_a_workload_uploaded_for_a_refused_device_is_planned_the_next_round(service_url, uploader):
    uploader.upload_profiles(published_rows(as_id="my-resnet"))
    planner = HttpPlanner(service_url, {"nano": "nano-resnet", "*": "my-resnet"})
    counted = Counted(planner)
    nodes = [NodeInfo(1, "agx-xavier", 0.01), NodeInfo(2, "nano", 0.01)]
    cache: dict = {}
    for _ in range(2):
        plans = plan_nodes(planner, nodes, DEADLINE_S, 1, cache)
        assert plans[1].mode is not None and plans[2].mode is None and "404" in plans[2].reason
    assert len(counted.plans) == 2  # one per workload, the refusal kept
    assert sorted(counted.listings) == ["my-resnet", "my-resnet", "nano-resnet", "nano-resnet"]
    uploader.upload_profiles(published_rows(as_id="nano-resnet"))  # AGX Xavier rows: nano is cross-device
    assert plan_nodes(planner, nodes, DEADLINE_S, 1, cache)[2].mode is not None


def test_a_basis_the_service_cannot_give_keeps_the_plans_one_more_round(service_url, uploader):
    planner, counted = _stored_and_counted(service_url, uploader)
    cache: dict = {}
    kept = plan_nodes(planner, NODES, DEADLINE_S, 1, cache)
    counted.fail = ConnectionFailed("no answer within 30 s", attempts=4)
    newcomer = NodeInfo(3, "agx-xavier", 0.05)
    plans = plan_nodes(planner, [*NODES, newcomer], DEADLINE_S, 1, cache)  # no crash: the round goes on
    assert {n: plans[n] for n in (1, 2)} == kept and len(counted.plans) == 2  # kept, nothing asked
    assert plans[3].mode is None and "not planned this round" in plans[3].reason and "30 s" in plans[3].reason
    # Nothing cached: the round is skipped with the failure (the strategy's PlannerError).
    with pytest.raises(PlannerError, match="30 s") as caught:
        plan_nodes(planner, NODES, DEADLINE_S, 1, {})
    assert caught.value.round_wide
    counted.fail = None
    uploader.upload_profiles(published_rows(as_id="my-resnet", n=10)[4:])
    plan_nodes(planner, NODES, DEADLINE_S, 1, cache)
    assert len(counted.plans) == 4  # read again: the refit reaches the plans


def test_a_refused_basis_read_falls_back_to_the_age_rule(service_url, uploader, monkeypatch):
    from jetpredict.integrations.flower import planners

    planner, counted = _stored_and_counted(service_url, uploader)
    monkeypatch.setattr(planners, "BASIS_PAGE", 1001)  # the service refuses it: 422, limit at most 1000
    cache: dict = {}
    for _ in range(PLAN_CACHE_ROUNDS + 1):
        assert plan_nodes(planner, NODES, DEADLINE_S, 1, cache)[1].mode is not None
    assert len(counted.plans) == 4  # asked again after PLAN_CACHE_ROUNDS rounds, as a planner that cannot say


def test_inline_rows_have_nothing_stored_to_read(service_url):
    planner = HttpPlanner(service_url, {"rows": published_rows(as_id="my-resnet")})
    counted = Counted(planner)
    assert planner.basis() is None
    plan_nodes(planner, NODES, DEADLINE_S, 1, {})
    assert counted.listings == []


class RevisedLocalPlanner(LocalPlanner):
    """A LocalPlanner whose basis a test sets (``revision``), as a planner of refittable models would say."""

    revision = 0
    asked = 0

    def basis(self):
        return (super().basis(), self.revision)

    def plan(self, clients, deadline_s, epochs):
        self.asked += 1
        return super().plan(clients, deadline_s, epochs)


def test_a_local_planners_plans_are_kept_until_its_basis_changes(resnet_model):
    planner = RevisedLocalPlanner(resnet_model)
    cache: dict = {}
    for _ in range(PLAN_CACHE_ROUNDS + 2):
        plan_nodes(planner, NODES, DEADLINE_S, 1, cache)
    assert planner.asked == 2  # its models never change under it: never asked again
    planner.revision = 1
    plan_nodes(planner, NODES, DEADLINE_S, 1, cache)
    assert planner.asked == 4


def test_an_unreachable_planner_keeps_the_plans_one_round_then_leaves_the_nodes_out(service_url, uploader, caplog):
    """README: a planner that cannot be reached leaves the plans one more round. The rescued plans were put
    back into the cache as they were, so they were kept for as long as the service stayed down (13 rounds
    seen, past the age rule), each round's warning saying "0 node(s) not planned" though nothing was asked."""
    from jetpredict.integrations.flower import ClientRecord

    planner, counted = _stored_and_counted(service_url, uploader)
    cache: dict = {}
    made = plan_nodes(planner, NODES, DEADLINE_S, 1, cache, server_round=1)
    assert not any(p.kept for p in made.values())
    counted.fail = ConnectionFailed("no answer within 30 s", attempts=4)
    with caplog.at_level("WARNING"):
        kept = plan_nodes(planner, NODES, DEADLINE_S, 1, cache, server_round=2)
    assert kept == made and all(p.kept and p.planned_round == 1 for p in kept.values())
    assert "2 node(s) keep round 1's plans; the planner failed" in caplog.text and "0 node(s)" not in caplog.text
    record = ClientRecord(round=2, node_id=1, device="agx-xavier", epoch_scale=0.01, selected=True)
    record.add_plan(kept[1])
    assert record.reason == "kept from round 1: planner unreachable" and record.mode == made[1].mode
    with pytest.raises(PlannerError, match="30 s"):  # down a second round: no plan is kept twice
        plan_nodes(planner, NODES, DEADLINE_S, 1, cache, server_round=3)
    counted.fail = None
    again = plan_nodes(planner, NODES, DEADLINE_S, 1, cache, server_round=4)
    assert again == made and not any(p.kept for p in again.values()) and len(counted.plans) == 4


def test_a_plan_confirmed_after_it_was_kept_may_be_kept_again(service_url, uploader):
    planner, counted = _stored_and_counted(service_url, uploader)
    cache: dict = {}
    plan_nodes(planner, NODES[:1], DEADLINE_S, 1, cache, server_round=1)
    counted.fail = ConnectionFailed("no answer within 30 s", attempts=4)
    plan_nodes(planner, NODES[:1], DEADLINE_S, 1, cache, server_round=2)  # node 1's plan kept
    counted.fail = None
    plan_nodes(planner, NODES, DEADLINE_S, 1, cache, server_round=3)  # node 1 confirmed, node 2 planned
    counted.fail = ConnectionFailed("no answer within 30 s", attempts=4)
    plans = plan_nodes(planner, NODES, DEADLINE_S, 1, cache, server_round=4)
    assert plans[1].kept and plans[1].planned_round == 1 and plans[2].kept and plans[2].planned_round == 3
    with pytest.raises(PlannerError, match="30 s"):
        plan_nodes(planner, NODES, DEADLINE_S, 1, cache, server_round=5)
