"""The end-of-input marker: how a publisher of frames says that a stream, or a run's input, ended.

A frame stream does not say when it ended, but what the end means is part of the
translation (a stream cut short ends with ``error stream_truncated``; a Chat stream without
``[DONE]`` ends with the ``run.finished`` its last chunk implied). Whoever publishes frames
(gateway, feeder) therefore publishes an *end-of-input marker* — a ProviderFrame with content
type :data:`END_OF_INPUT` — after them, with the same run key:

- body ``stream``: the stream ``stream_id`` (of ``api``, over ``transport``) delivers no more.
  A stream (not a poll) whose adapter has not seen the provider's terminal signal is closed
  there and its adapter dropped; a later call of the run starts afresh. This is what the offline
  driver does after each model call of a cassette.
- body ``run``: no more input for the run from this source (a recorded file ended, a poller gave
  up): every adapter of the run is closed. Closed adapters are kept until the run's state is
  released, so late duplicates still dedupe.

:func:`with_end_markers` appends them to a run's frames the way the offline driver closes
adapters, so fed frames normalize into exactly what ``modelevents normalize`` prints. Readers of
the frames topic that re-normalize frames must skip markers (:func:`is_end_of_input`).

The marker is a wire convention of the ``frames`` topic, so it lives with the frame contract:
the gateway and the feeder write it, the processor's normalizer
(``services/run_logic/normalizer.py``) acts on it, replay and the audit skip it.
"""

from __future__ import annotations

from modelevents.schemas.frames import ProviderFrame

__all__ = ["END_OF_INPUT", "END_OF_RUN_BODY", "END_OF_STREAM_BODY", "end_of_input", "is_end_of_input",
           "with_end_markers"]

END_OF_INPUT = "application/vnd.modelevents.end-of-input"
END_OF_STREAM_BODY = b"stream"
END_OF_RUN_BODY = b"run"


def end_of_input(frame: ProviderFrame, scope: str = "run") -> ProviderFrame:
    """The marker saying that ``frame``'s stream (``scope="stream"``) or its run's input
    (``scope="run"``) ended; it carries ``frame``'s run key, API, transport and stream."""
    if scope not in ("stream", "run"):
        raise ValueError(f"end-of-input scope {scope!r}: expected 'stream' or 'run'")
    stream_id = frame.stream_id or "s0"
    return ProviderFrame(
        frame_id=f"{stream_id}:end-of-{scope}", run_key=frame.run_key, provider=frame.provider,
        api=frame.api, transport=frame.transport, received_at=frame.received_at,
        content_type=END_OF_INPUT, body=END_OF_STREAM_BODY if scope == "stream" else END_OF_RUN_BODY,
        tenant=frame.tenant, stream_id=stream_id, index=frame.index + 1)


def is_end_of_input(frame: ProviderFrame) -> bool:
    return frame.content_type == END_OF_INPUT


def with_end_markers(frames: list[ProviderFrame]) -> list[ProviderFrame]:
    """A run's frames with an end-of-stream marker after each stream and an end-of-run marker
    last: the end of input as the offline driver treats a file (or a cassette's calls)."""
    out: list[ProviderFrame] = []
    for position, frame in enumerate(frames):
        out.append(frame)
        following = frames[position + 1] if position + 1 < len(frames) else None
        if following is None or following.stream_id != frame.stream_id:
            out.append(end_of_input(frame, "stream"))
    if frames:
        out.append(end_of_input(frames[-1], "run"))
    return out
