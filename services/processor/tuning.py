"""The stream processor's knobs (``ProcessorTuning``), with defaults that suit one worker on a small machine."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ProcessorTuning:
    """Knobs with defaults that suit one worker on a small machine."""

    batch_size: int = 1000  # records per batch at most
    # Seconds a batch waits, after its first record, for more. Records that are waiting are taken
    # at once; under load batches fill while the previous one is being sent, so this only bounds
    # how long a lone record waits for company (latency at low load).
    batch_within: float = 0.01
    # Seconds the broker may hold a fetch that finds nothing new (see BatchingConsumer).
    fetch_max_wait: float = 0.025
    # Run states kept decoded between batches (beyond those of the batches in flight): enough
    # for the runs of the last couple of batches; each costs ~8 KB decoded (~2–3 KB in the table).
    cached_runs: int = 2_000
    retention: float = 3600.0  # seconds before idle/terminal run state is released
    sweep_interval: float | None = None  # seconds between releases; default retention/4, ≤ 60 s
    stats_interval: float = 5.0  # seconds between progress log lines (0: none)
    # A worker that dies without leaving its group (SIGKILL, a lost host) keeps its partitions
    # this long; Kafka's 45 s default (Faust's 60 s) is a long pause for a stream.
    session_timeout: float = 30.0
    # Records Faust buffers for the run agent. Beyond 80% of it Faust stops fetching the
    # partitions concerned until it drained to 40%, and aiokafka then sends no fetch at all for
    # 100 ms (see BatchingConsumer): sized to hold one fetch of a few partitions (1 MiB each,
    # ~3,000 frames), four times Faust's default. Costs up to ~25 MB while a backlog fills it.
    stream_buffer: int = 16_384

    def __post_init__(self) -> None:
        if (self.batch_size < 1 or self.batch_within <= 0 or self.retention <= 0
                or self.session_timeout < 6 or self.cached_runs < 0 or self.fetch_max_wait <= 0
                or self.stream_buffer < 2):
            raise ValueError("batch_size ≥ 1, batch_within > 0, fetch_max_wait > 0, retention > 0, "
                             "cached_runs ≥ 0, stream_buffer ≥ 2 and session_timeout ≥ 6 s are "
                             "required")

    @property
    def sweep_every(self) -> float:
        if self.sweep_interval is not None:
            return self.sweep_interval
        return max(1.0, min(self.retention / 4, 60.0))
