"""Hostile recordings, small on disk, and a way to run code under a memory ceiling.

Each bomb is built in the test that uses it (nothing large is checked in): a gzip body of
zeros, a YAML alias bomb, a truncated gzip body. ``run_limited`` runs a Python program in a
subprocess whose address space is capped with RLIMIT_AS, so a reader that expands the bomb
fails there (MemoryError, or killed) instead of taking the machine's memory.
"""

from __future__ import annotations

import base64
import resource
import subprocess
import sys
import zlib

from tests.paths import REPO_ROOT

# Far above what the bounded readers need (~40 MB RSS for the CLI), far below what the bombs
# expand to (1 GiB and more).
MEMORY_CAP = 400 << 20

_MEMBER = 8 << 20  # zeros per gzip member


def gzip_of_zeros(size: int = 1 << 30) -> bytes:
    """``size`` zero bytes gzip-compressed (~1 KB per MiB): a gzip bomb.

    Built as identical gzip members, one after the other (RFC 1952 §2.2; gzip.decompress and
    every HTTP client read them as one body), so the test compresses 8 MiB, not 1 GiB.
    """
    packer = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    member = packer.compress(b"\0" * _MEMBER) + packer.flush()
    return member * (size // _MEMBER)


def one_call_cassette(body: bytes, *, content_type: str = "text/event-stream",
             encoding: str = "gzip") -> bytes:
    """A one-interaction vcrpy cassette (Chat Completions) whose response body is ``body``."""
    return ("interactions:\n"
            "- request: {method: POST, uri: 'https://api.openai.com/v1/chat/completions', "
            "body: '{\"stream\": true}'}\n"
            "  response:\n"
            "    status: {code: 200}\n"
            f"    headers: {{content-type: [{content_type}], content-encoding: [{encoding}]}}\n"
            f"    body: {{string: !!binary '{base64.b64encode(body).decode()}'}}\n").encode()


def yaml_alias_bomb(levels: int = 9) -> bytes:
    """The "billion laughs" as a pydantic-ai cassette: ~500 bytes, 9**levels strings once the
    ``parsed_body`` is serialized."""
    lines = ['l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"l{n}: &l{n} [" + ",".join([f"*l{n - 1}"] * 9) + "]" for n in range(1, levels)]
    return ("\n".join(lines) + "\n"
            "interactions:\n"
            "- request: {method: POST, uri: 'https://api.openai.com/v1/chat/completions'}\n"
            "  response:\n"
            "    status: {code: 200}\n"
            f"    parsed_body: *l{levels - 1}\n").encode()


def sse_chunks(count: int = 20) -> bytes:
    return b"".join(b'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,'
                    b'"delta":{"content":"x%d"}}]}\n\n' % n for n in range(count)) \
        + b"data: [DONE]\n\n"


def truncated_gzip(data: bytes | None = None) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    whole = packer.compress(data or sse_chunks()) + packer.flush()
    return whole[:-12]  # the end of the deflate stream and the CRC/size trailer are gone


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def run_limited(argv: list[str], timeout: float = 120) -> subprocess.CompletedProcess:
    """``python argv...`` with its address space capped at MEMORY_CAP."""
    return subprocess.run([sys.executable, *argv], capture_output=True, timeout=timeout,
                          preexec_fn=_cap_memory, cwd=REPO_ROOT)
