"""Prompt-injection signals' throughput (services/policy/injection.py) against the five phrase
patterns of earlier versions, in one run, on the same texts.

    .venv/bin/python bench/injection.py [--rounds 5]

Texts, each scanned as one tool output: a 1 MB search-results JSON (ASCII), the labelled
corpus (tests/services/policy/injection_corpus.yaml, its texts one by one), 1 MB of
multilingual prose (non-ASCII: the normalized second pass runs) and a 1 MB base64 image (the
base64 run is decoded). Prints a Markdown table: MB/s of each (the best of ``--rounds``
alternating rounds), the ratio to the earlier patterns and the time per corpus text. The earlier patterns also give the
corpus's recall and precision for comparison.
"""

from __future__ import annotations

import argparse
import base64
import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

import orjson
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/paths.py

from modelevents.services.policy.injection import injection_signals
from tests.paths import INJECTION_CORPUS

# The baseline: the patterns of earlier versions, unchanged.
_EARLIER = {
    "ignore_instructions": re.compile(
        r"\b(ignore|disregard|forget)\b.{0,40}\b(previous|prior|above|earlier|all)\b.{0,20}"
        r"\b(instructions?|prompts?|rules|messages?)\b", re.I | re.S),
    "role_override": re.compile(r"\b(you are now|act as|new instructions?|system prompt)\b",
                                re.I),
    "fake_role_tag": re.compile(r"<\s*/?\s*(system|assistant|instructions?)\s*>|^\s*(system|"
                                r"assistant)\s*:", re.I | re.M),
    "tool_coercion": re.compile(r"\b(call|invoke|run|use)\b.{0,30}\b(tool|function)\b.{0,60}"
                                r"\b(now|immediately|instead)\b", re.I | re.S),
    "exfiltration": re.compile(r"\b(send|post|upload|forward)\b.{0,60}\b(api[_ ]?keys?|"
                               r"passwords?|secrets?|credentials|tokens?)\b", re.I | re.S),
}


def earlier_signals(text: str) -> list[str]:
    return [name for name, pattern in _EARLIER.items() if pattern.search(text)]


def texts() -> dict[str, list[str]]:
    corpus = yaml.safe_load(INJECTION_CORPUS.read_text(encoding="utf-8"))
    results = [{"title": f"Result {i}: how to configure the router model {i}",
                "url": f"https://example.com/docs/{i}?page=2",
                "snippet": "Follow the setup steps in the manual; the previous firmware is "
                           "kept as a fallback and the admin token is rotated daily."}
               for i in range(5000)]
    search = orjson.dumps({"results": results}).decode()
    prose = ("Bitte lesen Sie die Anleitung. Les instructions sont dans la boîte. Следуйте "
             "инструкциям. 请按照上面的说明安装软件。取扱説明書に従ってください。 ")
    image = "data:image/png;base64," + base64.b64encode(os.urandom(750_000)).decode()
    return {"search JSON, 1 MB": [search[:1_000_000]],
            "corpus, text by text": corpus["injection"] + corpus["benign"],
            "multilingual prose, 1 MB": [(prose * 6000)[:350_000]],
            "base64 image, 1 MB": [image]}


def throughput(scan: Callable[[str], list[str]], items: list[str]) -> float:
    size = sum(len(t.encode()) for t in items)
    started = time.perf_counter()
    for text in items:
        scan(text)
    return size / 1e6 / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds (best taken)")
    rounds = parser.parse_args().rounds
    corpus = yaml.safe_load(INJECTION_CORPUS.read_text(encoding="utf-8"))
    for name, scan in (("earlier patterns", earlier_signals), ("signals", injection_signals)):
        hits = sum(bool(scan(t)) for t in corpus["injection"])
        false = sum(bool(scan(t)) for t in corpus["benign"])
        print(f"{name}: recall {hits / len(corpus['injection']):.3f}, "
              f"precision {hits / max(1, hits + false):.3f} on the corpus")
    print("\n| text | earlier patterns | signals | ratio |\n|---|---:|---:|---:|")
    for label, items in texts().items():
        best = {"earlier": 0.0, "signals": 0.0}
        for _ in range(rounds):
            best["earlier"] = max(best["earlier"], throughput(earlier_signals, items))
            best["signals"] = max(best["signals"], throughput(injection_signals, items))
        print(f"| {label} | {best['earlier']:.1f} MB/s | {best['signals']:.1f} MB/s | "
              f"{best['signals'] / best['earlier']:.2f} |")
    items = texts()["corpus, text by text"]
    started = time.perf_counter()
    for text in items:
        injection_signals(text)
    print(f"\nsignals per corpus text (mean {sum(map(len, items)) / len(items):.0f} characters): "
          f"{(time.perf_counter() - started) / len(items) * 1e6:.0f} µs")


if __name__ == "__main__":
    main()
