"""PipelineSettings' durability settings (services/kafka/settings.py) and the topic specs they
give (services/kafka/topics.py): replication factor, min.insync.replicas, retention per topic."""

from __future__ import annotations

import dataclasses

import pytest
from aiokafka.errors import InvalidReplicationFactorError

from modelevents.schemas.errors import ConfigError
from modelevents.services.kafka import topics
from modelevents.services.kafka.settings import TOPICS, PipelineSettings


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("MODELEVENTS_REPLICATION_FACTOR", "MODELEVENTS_MIN_INSYNC_REPLICAS"):
        monkeypatch.delenv(name, raising=False)


def test_replication_defaults_fit_the_single_local_broker():
    settings = PipelineSettings()
    assert (settings.replication_factor, settings.min_insync) == (1, 1)


def test_replication_factor_and_min_insync_come_from_the_environment(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("MODELEVENTS_REPLICATION_FACTOR", "3")
    # Unset: one less than the factor, so one broker may be down and acks=all still means two.
    assert PipelineSettings().min_insync == 2
    monkeypatch.setenv("MODELEVENTS_MIN_INSYNC_REPLICAS", "3")
    settings = PipelineSettings()
    assert (settings.replication_factor, settings.min_insync) == (3, 3)


def test_min_insync_above_the_replication_factor_is_refused(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("MODELEVENTS_REPLICATION_FACTOR", "2")
    monkeypatch.setenv("MODELEVENTS_MIN_INSYNC_REPLICAS", "3")
    with pytest.raises(ConfigError, match=r"^MODELEVENTS_MIN_INSYNC_REPLICAS=3 must be between 1 "
                                          r"and MODELEVENTS_REPLICATION_FACTOR=2"):
        PipelineSettings()
    monkeypatch.setenv("MODELEVENTS_REPLICATION_FACTOR", "zero")
    with pytest.raises(ConfigError, match="MODELEVENTS_REPLICATION_FACTOR='zero' is not a whole number"):
        PipelineSettings()


def test_every_topic_spec_carries_min_insync_and_an_explicit_retention():
    settings = dataclasses.replace(PipelineSettings(), replication_factor=3, min_insync_replicas=2)
    for name, compacted in TOPICS.items():
        configs = topics.topic_configs(name, settings)
        assert configs["min.insync.replicas"] == "2", name
        if compacted:
            assert configs["cleanup.policy"] == "compact", name
        else:
            assert configs["cleanup.policy"] == "delete", name
            assert configs["retention.ms"] == str(topics.RETENTION_MS[name]), name
    assert topics.topic_configs("frames", settings)["retention.ms"] == "-1"
    assert topics.topic_configs("receipts", settings)["retention.ms"] == "-1"
    owners = topics.topic_configs("run-owners", settings)
    assert (owners["retention.ms"], owners["retention.bytes"]) == ("-1", "-1")
    assert topics.topic_configs("events", settings)["retention.ms"] == str(7 * 24 * 3600 * 1000)


def test_the_worker_topics_and_changelogs_get_the_same_durability(tmp_path):
    from modelevents.services.processor.app import create_app

    settings = dataclasses.replace(PipelineSettings(), replication_factor=3, min_insync_replicas=2)
    app = create_app(settings, workdir=tmp_path)
    assert app.conf.topic_replication_factor == 3
    changelogs = {table.changelog_topic.get_topic_name(): table.changelog_topic
                  for table in app.tables.values()}
    assert set(changelogs) == set(topics.changelog_topics(settings).values())
    for topic in changelogs.values():
        assert topic.config["min.insync.replicas"] == "2"
        # None: Faust creates the changelog with conf.topic_replication_factor (asserted above).
        assert topic.replicas is None


def test_a_refused_replication_factor_names_the_setting():
    settings = dataclasses.replace(PipelineSettings(), replication_factor=2)
    error = topics.creation_error(settings, "modelevents.events",
                                  InvalidReplicationFactorError.errno, "Unable to replicate")
    assert "MODELEVENTS_REPLICATION_FACTOR=2" in str(error)
    assert "at most the number of brokers" in str(error)
