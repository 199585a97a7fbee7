"""Instructions per frame of one path of bench/adapters.py, counted by valgrind's callgrind.

On a shared 2-core VM the rates of bench/adapters.py move by ±10% between two runs of the same
code, which hides a change worth a few percent. An instruction count does not move with the
load, so this compares two versions of the adapters exactly (instructions are not time: C code
such as orjson's runs more of them per nanosecond than the interpreter, so compare versions of
the same path, not paths with each other):

    PYTHONHASHSEED=0 valgrind --tool=callgrind --collect-atstart=no \\
        --toggle-collect=functools_reduce --callgrind-out-file=/tmp/cg.out \\
        .venv/bin/python bench/adapters_instructions.py --api gemini-interactions --path a --rounds 10
    grep ^summary: /tmp/cg.out     # Ir; divide by the frame count this script prints

Only the measured rounds run inside ``functools.reduce``, which is what callgrind is told to
count (imports, loading the corpus and two warm-up rounds stay outside). To measure another
checkout of the package, put it first on PYTHONPATH. With PYTHONHASHSEED fixed two runs of the
same code agree to ~0.3%: differences below that are not a change. ~30 s a run (valgrind starts
slowly).
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import adapters as bench  # bench/adapters.py: the same paths, the same corpus


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=bench.DEFAULT_CORPUS,
                        help="recorded provider corpus (default: %(default)s)")
    parser.add_argument("--api", required=True, help="one provider API, e.g. openai-chat")
    parser.add_argument("--path", choices=("d", "a", "b"), default="a",
                        help="(d) floor, (a) ours, (b) ours + Avro (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=10,
                        help="measured passes over the API's streams (default: %(default)s)")
    args = parser.parse_args()
    corpus = bench.load_corpus(args.corpus)
    if args.api not in corpus.streams:
        sys.exit(f"no streams of {args.api} in {args.corpus}; APIs: {', '.join(corpus.streams)}")
    streams = corpus.streams[args.api]
    run = bench.floor if args.path == "d" else bench.ours(args.api, args.path == "b")
    run(streams)  # warm-up: schema compilation, memos, first-call costs
    run(streams)
    functools.reduce(lambda _, __: run(streams), range(args.rounds), None)
    print(f"{corpus.frames[args.api] * args.rounds} frames")
    return 0


if __name__ == "__main__":
    sys.exit(main())
