"""``modelevents topics check`` and ``topics apply`` (issue #16) against the real broker: topics
created as an older version (or a hand) left them — another retention, min ISR, cleanup policy,
retention.bytes, fewer partitions, one missing, a worker changelog with min ISR 2 — are each
reported by check, fixed by apply (configs altered one by one, the others kept; partitions only
with --add-partitions), and check is clean afterwards. A replication factor the single broker
cannot give is reported with why; a value the broker refuses changes nothing."""

from __future__ import annotations

import dataclasses
import time

import pytest
from aiokafka.admin import NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from modelevents.services import cli
from modelevents.services.kafka import clients
from modelevents.services.kafka.incremental_configs import set_topic_configs
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.kafka.topics import changelog_topics, topic_configs
from tests.integration.pipeline import HANG_GUARD_S, kafka_args, run

pytestmark = pytest.mark.kafka

PARTITIONS = 3
HOUR_MS = "3600000"
GIB = "1073741824"


async def _admin(settings: PipelineSettings):
    return await clients.start_client(clients.make_admin(settings), settings)


async def _create_as_an_older_version(settings: PipelineSettings) -> None:
    """The pipeline's topics as they might be found: all but receipts, several off the settings,
    events with a hand-set max.message.bytes that apply must keep."""
    odd = {
        "events": {"retention.ms": HOUR_MS, "max.message.bytes": "2000000"},
        "frames": {"min.insync.replicas": "2"},
        "runs": {"cleanup.policy": "delete"},
        "run-owners": {"retention.bytes": GIB},
    }
    wanted = []
    for name, full in settings.topic_names.items():
        if name == "receipts":
            continue
        configs = {**topic_configs(name, settings), **odd.get(name, {})}
        wanted.append(NewTopic(full, 2 if name == "dlq" else PARTITIONS, 1, topic_configs=configs))
    changelog = changelog_topics(settings)["run"]
    wanted.append(NewTopic(changelog, PARTITIONS, 1, topic_configs={
        "cleanup.policy": "compact", "min.insync.replicas": "2"}))
    admin = await _admin(settings)
    try:
        response = await admin.create_topics(wanted)
        assert all(code == 0 for _, code, *_ in response.topic_errors), response.topic_errors
    finally:
        await admin.close()


def _configs_once(settings: PipelineSettings, topic: str, key: str, value: str
                  ) -> dict[str, str]:
    """The topic's configs once ``key`` reads ``value`` (or after HANG_GUARD_S: the caller's
    assertion then says what it read)."""
    deadline = time.monotonic() + HANG_GUARD_S
    while (configs := run(_configs(settings, topic))).get(key) != value \
            and time.monotonic() < deadline:
        time.sleep(0.2)
    return configs


async def _configs(settings: PipelineSettings, topic: str) -> dict[str, str]:
    admin = await _admin(settings)
    try:
        responses = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    finally:
        await admin.close()
    return {e[0]: e[1] for response in responses for res in response.resources for e in res[4]}


async def _delete(names: list[str], settings: PipelineSettings) -> None:
    admin = await _admin(settings)
    try:
        await admin.delete_topics(names)
    finally:
        await admin.close()


def _cli(args: list[str], capsys) -> tuple[int, list[str], str]:
    code = cli.main(args)
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err


def test_check_reports_every_difference_apply_fixes_them_and_check_is_clean(
        make_settings, capsys) -> None:
    settings = make_settings(create_topics=False, partitions=PARTITIONS)
    run(_create_as_an_older_version(settings))
    args = [*kafka_args(settings), "--partitions", str(PARTITIONS), "--app-id", settings.app_id]
    t = settings.topic
    changelog = changelog_topics(settings)["run"]
    try:
        code, lines, err = _cli(["topics", "check", *args], capsys)
        assert code == 1, (lines, err)
        assert sorted(lines) == sorted([
            f"{t('events')}: retention.ms is {HOUR_MS}, configured 604800000",
            f"{t('frames')}: min.insync.replicas is 2, configured 1",
            f"{t('runs')}: cleanup.policy is delete, configured compact",
            f"{t('run-owners')}: retention.bytes is {GIB}, configured -1",
            f"{t('dlq')}: partitions is 2, configured 3",
            f"{t('receipts')}: missing",
            f"{changelog}: min.insync.replicas is 2, configured 1",
        ]), lines
        assert "7 difference(s)" in err and "topics apply" in err

        # apply without --add-partitions: everything but the partitions.
        code, lines, err = _cli(["topics", "apply", *args], capsys)
        assert code == 1, (lines, err)
        assert f"created   {t('receipts')}" in lines
        assert f"altered   {t('events')}: retention.ms=604800000" in lines
        assert f"altered   {t('runs')}: cleanup.policy=compact" in lines
        assert f"altered   {changelog}: min.insync.replicas=1" in lines
        assert any(line.startswith(f"left      {t('dlq')}: partitions is 2")
                   and "--add-partitions" in line for line in lines), lines
        assert "worker's state must be rebuilt" in err
        # KRaft applies an altered config after the controller commits it: a broker under load
        # may describe the old value for a moment after `apply` returned.
        events = _configs_once(settings, t("events"), "retention.ms", "604800000")
        assert events["retention.ms"] == "604800000"
        assert events["max.message.bytes"] == "2000000"  # incremental: the rest is kept
        code, lines, _ = _cli(["topics", "check", *args], capsys)
        assert (code, lines) == (1, [f"{t('dlq')}: partitions is 2, configured 3"])

        code, lines, err = _cli(["topics", "apply", "--add-partitions", *args], capsys)
        assert code == 0, (lines, err)
        assert lines == [f"added     {t('dlq')}: 3 partitions"]
        assert err.count("WARNING") == 2 and "new app id" in err  # before, and once done
        code, lines, err = _cli(["topics", "check", *args], capsys)
        assert (code, lines) == (0, []), err
        assert "every topic as configured" in err
    finally:
        run(_delete([changelog], settings))


def test_a_replication_factor_the_cluster_cannot_give_is_reported_not_hidden(
        make_settings, capsys, monkeypatch) -> None:
    settings = make_settings(partitions=PARTITIONS)  # created with 1 replica, min ISR 1
    monkeypatch.setenv("MODELEVENTS_REPLICATION_FACTOR", "2")
    monkeypatch.setenv("MODELEVENTS_MIN_INSYNC_REPLICAS", "2")
    args = [*kafka_args(settings), "--partitions", str(PARTITIONS), "--app-id", settings.app_id]
    code, lines, _ = _cli(["topics", "check", *args], capsys)
    assert code == 1
    assert sorted(lines) == sorted(
        [f"{full}: replication is 1, configured 2" for full in settings.topic_names.values()]
        + [f"{full}: min.insync.replicas is 1, configured 2"
           for full in settings.topic_names.values()])
    code, lines, err = _cli(["topics", "apply", *args], capsys)
    assert code == 1, err
    text = "\n".join(lines)
    assert "the replication factor cannot be reached: the cluster has 1 broker(s)" in text
    assert "MODELEVENTS_REPLICATION_FACTOR=2" in text
    # min.insync.replicas 2 on a 1-replica topic would stop every acks=all write: not set.
    assert not any(line.startswith("altered") for line in lines), lines
    assert f"left      {settings.topic('frames')}: min.insync.replicas is 1, configured 2 (not set " \
           f"while the topic has 1 replica(s)" in text
    assert run(_configs(settings, settings.topic("frames")))["min.insync.replicas"] == "1"


def test_bad_input_is_a_clear_error_and_changes_nothing(make_settings, capsys) -> None:
    settings = make_settings(partitions=PARTITIONS)
    events = settings.topic("events")
    before = run(_configs(settings, events))

    async def refused() -> dict[str, str | None]:
        admin = await _admin(settings)
        try:
            return await set_topic_configs(admin, {events: {"retention.ms": "soon",
                                                            "min.insync.replicas": "1"}})
        finally:
            await admin.close()

    answer = run(refused())
    assert answer[events] and "retention.ms" in answer[events], answer
    assert run(_configs(settings, events)) == before
    code, _, err = _cli(["topics", "check", "--add-partitions", *kafka_args(settings)], capsys)
    assert code == 2 and "--add-partitions goes with `topics apply`" in err
    # Topics that do not exist at all: check names each, apply creates them.
    empty = dataclasses.replace(settings, topic_prefix=settings.topic_prefix + "none.")
    code, lines, _ = _cli(["topics", "check", *kafka_args(empty), "--partitions",
                           str(PARTITIONS)], capsys)
    assert code == 1 and len(lines) == len(empty.topic_names)
    assert all(line.endswith(": missing") for line in lines)
