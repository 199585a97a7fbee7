"""How the legacy values here were made: by the last version that pickled table values (commit
1199897), run from a checkout of it on the path. Kept for provenance; the tests only read the
.bin files. Each run value is the state of run ``legacy-<api>`` after the first half of a
fixture's frames (end-of-input markers included, received_at 0); the alias names that chat run.

    python make_legacy.py <checkout of 1199897 as a modelevents package root> <out dir>
"""

import sys
from pathlib import Path

sys.path.insert(0, sys.argv[1])

from modelevents.services import processor
from modelevents.services.feeder import frames_for_file
from modelevents.services.normalizer import RunNormalizer, with_end_markers
from modelevents.services.sequencer import RunSequence

# Not tests/paths.py: this runs with an old checkout first on the path, whose tests package
# has no paths module; the fixtures are this checkout's tests/fixtures.
FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
HALVES = {"openai-chat": "reasoning-then-text.sse", "openai-responses": "text-with-usage.sse",
          "anthropic-messages": "pause-turn-then-continuation.sse",
          "gemini-generate": "tool-call-streamed-args.sse"}
out = Path(sys.argv[2])
for api, name in HALVES.items():
    run_id = f"legacy-{api}"
    frames = with_end_markers(frames_for_file(FIXTURES / api / name, run_id=run_id,
                                              received_at=0).frames)
    work = processor.RunWork(RunNormalizer(run_id))
    for frame in frames[: len(frames) // 2]:
        for event in work.normalizer.translate(frame).events:
            work.sequence = work.sequence or RunSequence.new(run_id, "default")
            work.sequence.step(event, now=1000.0)
    (out / f"legacy-run-{api}.bin").write_bytes(work.pack(retention=60))
(out / "legacy-alias.bin").write_bytes(processor._pack("legacy-openai-chat", 4600.0))
