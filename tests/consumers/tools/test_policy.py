"""The policy (consumers/tools/policy.py): nothing is allowed that the policy does not grant."""

from __future__ import annotations

from modelevents.consumers.tools.contract import ToolContract
from modelevents.consumers.tools.policy import Policy

READ = ToolContract(name="get_weather", parameters={"type": "object"}, run=lambda a, c: a,
                    cost=0.5)
WRITE = ToolContract(name="add_note", parameters={"type": "object"}, run=lambda a, c: a,
                     action="write", scope=lambda a: f"notebook:{a['notebook']}")


def policy(**rules):
    return Policy.from_dict({"tenants": {"acme": rules}})


def test_an_unknown_tenant_and_an_unlisted_tool_are_denied():
    rules = policy(tools=["get_weather"])
    assert rules.check("acme", "r", READ, {}).allowed
    assert rules.check("other", "r", READ, {}).verdict == "deny"
    assert "not allowed" in rules.check("acme", "r", WRITE, {"notebook": "x"}).reason


def test_the_hosted_section_of_the_same_file_is_not_the_executors():
    rules = policy(tools=["get_weather"], hosted={"tools": ["web_search"]})
    assert rules.check("acme", "r", READ, {}).allowed


def test_object_scope_is_granted_per_tool_and_can_be_revoked():
    rules = policy(scopes={"add_note": ["notebook:team"]}, approve_writes=False)
    assert rules.check("acme", "r", WRITE, {"notebook": "team"}).allowed
    assert rules.check("acme", "r", WRITE, {"notebook": "hr"}).verdict == "deny"
    rules.revoke("acme", "add_note", "notebook:team")
    assert "revoked" in rules.check("acme", "r", WRITE, {"notebook": "team"}).reason


def test_writes_need_an_approval_unless_the_tenant_waives_it():
    assert policy(scopes={"add_note": ["notebook:t"]}).check(
        "acme", "r", WRITE, {"notebook": "t"}).verdict == "approve"


def test_budgets_of_calls_and_cost_per_run_and_per_tenant():
    rules = policy(max_calls_per_run=2, max_cost_per_tenant=1.0)
    rules.charge("acme", "r1", 0.5)
    assert rules.check("acme", "r1", READ, {}).allowed
    rules.charge("acme", "r1", 0.0)
    assert "per run" in rules.check("acme", "r1", READ, {}).reason
    assert rules.check("acme", "r2", READ, {}).allowed  # 0.5 spent + 0.5 fits 1.0
    rules.charge("acme", "r2", 0.5)
    assert "for this tenant" in rules.check("acme", "r3", READ, {}).reason


def test_a_policy_file(tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text("tenants:\n  acme:\n    tools: [get_weather]\n    auto_continue: true\n")
    loaded = Policy.from_file(path)
    assert loaded.check("acme", "r", READ, {}).allowed and loaded.tenants["acme"].auto_continue


def test_admitted_calls_hold_their_place_so_side_by_side_they_cannot_overshoot():
    rules = policy(max_calls_per_run=2, max_cost_per_run=10.0)
    assert rules.admit("acme", "r", READ, {}).allowed
    assert rules.admit("acme", "r", READ, {}).allowed  # two held, none charged yet
    assert "2 tool calls per run" in rules.admit("acme", "r", READ, {}).reason
    rules.charge("acme", "r", 0.5)  # the first ran: its place became the charge
    assert rules.calls_by_run["r"] == 1 and rules.held_by_run["r"] == 1
    rules.release("acme", "r", 0.5)  # the second was refused before it ran
    assert rules.held_by_run["r"] == 0 and rules.admit("acme", "r", READ, {}).allowed


def test_a_granted_write_is_asked_again_and_held_only_when_allowed_now():
    rules = policy(scopes={"add_note": ["notebook:team"]}, max_calls_per_run=1)
    note = {"notebook": "team"}
    assert rules.admit("acme", "r", WRITE, note).verdict == "approve"  # asking holds nothing
    assert rules.held_by_run["r"] == 0
    assert rules.admit("acme", "r", WRITE, note, approved=True).allowed
    assert "budget exhausted" in rules.admit("acme", "r", WRITE, note, approved=True).reason
    rules.release("acme", "r", WRITE.cost)
    rules.revoke("acme", "add_note", "notebook:team")
    assert "revoked" in rules.admit("acme", "r", WRITE, note, approved=True).reason


def test_the_hosted_section_is_left_to_the_gateway_and_the_worker(tmp_path):
    # One policy file for both: the executor reads its own keys and skips hosted:.
    path = tmp_path / "policy.yaml"
    path.write_text("tenants:\n  acme:\n    tools: [get_weather]\n    hosted:\n"
                    "      tools: [web_search]\n      allowed_domains: [docs.python.org]\n")
    assert Policy.from_file(path).check("acme", "r", READ, {}).allowed
