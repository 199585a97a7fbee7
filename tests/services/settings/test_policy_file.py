"""One policy file for the tool executor and the gateway (services/cli/settings_tree.py): the
gateway reads ``tools.policy`` unless ``gateway.policy`` / ``$MODELEVENTS_POLICY`` names
another."""

from __future__ import annotations

from pathlib import Path

from modelevents.services.cli.settings_tree import load_settings


def test_the_gateway_reads_the_tool_executors_policy_file_unless_told_otherwise(tmp_path: Path):
    config = tmp_path / "config.yaml"
    config.write_text("tools:\n  policy: shared.yaml\n")
    assert load_settings(config, env={}).settings.gateway.policy == Path("shared.yaml")
    own = load_settings(config, env={"MODELEVENTS_POLICY": "gateway.yaml"}).settings
    assert own.gateway.policy == Path("gateway.yaml") and own.tools.policy == Path("shared.yaml")
    config.write_text("policy: other.yaml\ntools:\n  policy: shared.yaml\n")  # gateway keys on top
    assert load_settings(config, env={}).settings.gateway.policy == Path("other.yaml")
    assert load_settings(None, env={}).settings.gateway.policy is None
