"""An archive against the heads kept outside it (``docs/audit.md``, "Anchoring").

    anchors = Anchors(expect_head=HASH, heads=await published_heads(settings, archive_id),
                      digests=Path("copied-digests"), public_key=load_public_key(path))
    report = verify_archive(root, anchors)      # the "anchor" and "digests" findings

The chain proves the archive consistent with itself; a head kept where the archive's writer
cannot rewrite it proves it is the archive that was written: the anchored chain block must be
in the archive with the anchored hash. An archive rewritten (a run deleted, its writer run
again) has another hash there; one cut short ends before it. A signature proves the head is the
operator's only against the key given (``--public-key``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from modelevents.consumers.audit.format import Findings
from modelevents.consumers.audit.heads import HEAD_FORMAT, Digest, read_digests
from modelevents.consumers.audit.signing import signature_problem

_COUNTS_LISTED = 6


@dataclass
class Anchors:
    """What to compare the archive with; each None is not asked for."""

    expect_head: str | None = None
    heads: list[dict[str, Any] | None] | None = None  # the heads topic's, in log order
    heads_topic: str = "audit-heads"
    digests: Path | None = None
    public_key: Ed25519PublicKey | None = None

    @property
    def asked(self) -> bool:
        return self.expect_head is not None or self.heads is not None or self.digests is not None


@dataclass
class Chain:
    """What the manifests record of the chain: each block's hash and records."""

    archive_id: str | None
    hashes: dict[int, str] = field(default_factory=dict)
    offsets: dict[int, dict[str, Any]] = field(default_factory=dict)  # index → offsets spans

    @property
    def last(self) -> int:
        return max(self.hashes, default=-1)

    def records_to(self, index: int) -> dict[str, int]:
        """Records per topic-partition in chain blocks 0..index."""
        out: dict[str, int] = {}
        for i, spans in self.offsets.items():
            if i <= index:
                for name, span in spans.items():
                    out[name] = out.get(name, 0) + span.get("count", 0)
        return out


def _counts(anchored: dict[str, int], found: dict[str, int]) -> str:
    differ = [name for name in sorted(set(anchored) | set(found))
              if anchored.get(name) != found.get(name)]
    if not differ:
        return ""
    listed = ", ".join(f"{name} {anchored.get(name, 0)} anchored, {found.get(name, 0)} here"
                       for name in differ[:_COUNTS_LISTED])
    more = f", … ({len(differ) - _COUNTS_LISTED} more)" if len(differ) > _COUNTS_LISTED else ""
    return f"; records per partition: {listed}{more}"


def compare_head(report: Findings, check: str, where: str, head: dict[str, Any],
                 chain: Chain) -> bool:
    """Fail when the archive does not hold ``head`` (its archive, chain block, hash, length);
    True when it does."""
    if head.get("format") != HEAD_FORMAT:
        report.fail(check, where, f"not a head of format {HEAD_FORMAT}")
        return False
    if head.get("archive_id") != chain.archive_id:
        report.fail(check, where, f"the head is of archive {head.get('archive_id')}, this one is "
                    f"{chain.archive_id} (archive.json): another archive's head, or archive.json "
                    "was replaced")
        return False
    index, digest = head.get("chain_index", -1), head.get("hash")
    anchored = head.get("records") or {}
    label = f"checkpoint {head.get('checkpoint')} (chain block {index}, hash {str(digest)[:16]}…)"
    if index > chain.last:
        report.fail(check, where, f"cut short: the anchored head is {label}, this archive ends "
                    f"at chain block {chain.last}; what was archived after that block is gone"
                    + _counts(anchored, chain.records_to(chain.last)))
        return False
    found = chain.hashes.get(index)
    if found != digest:
        report.fail(check, where, f"rewritten: the anchored head is {label}, this archive's "
                    f"chain block {index} has hash {str(found)[:16]}…; the archive is not the "
                    "one whose head was anchored (records changed, removed or added before it)"
                    + _counts(anchored, chain.records_to(index)))
        return False
    if chain.last > index:
        report.note(check, where, f"holds the anchored head, {label}; chain blocks "
                    f"{index + 1}..{chain.last} were written after it and are not anchored yet")
    return True


def _signed(report: Findings, check: str, where: str, signed: dict[str, Any],
            trusted: Ed25519PublicKey | None) -> bool:
    problem = signature_problem(signed, trusted)
    if problem is not None:
        report.fail(check, where, f"signature: {problem}")
        return False
    return True


def check_anchors(report: Findings, anchors: Anchors, chain: Chain) -> None:
    """Every comparison ``anchors`` asks for."""
    if anchors.expect_head is not None:
        _expected(report, anchors.expect_head.strip().lower(), chain)
    if anchors.heads is not None:
        _topic_heads(report, anchors, chain)
    if anchors.digests is not None:
        _digests(report, anchors.digests, anchors.public_key, chain)
    if anchors.public_key is None and (anchors.heads is not None or anchors.digests is not None):
        report.note("anchor", "signatures", "checked against the key each head names, not one "
                    "you trust: give --public-key to prove the heads are yours")


def _expected(report: Findings, expected: str, chain: Chain) -> None:
    where = f"--expect-head {expected[:16]}…"
    at = [i for i, h in chain.hashes.items() if h == expected]
    if not at:
        report.fail("anchor", where, "no chain block of this archive has this hash: the archive "
                    "was rewritten or cut short since that head was taken (its head is now "
                    f"{chain.hashes.get(chain.last, '(none)')[:16]}… at chain block {chain.last})")
    elif at[0] < chain.last:
        report.note("anchor", where, f"is chain block {at[0]}; chain blocks "
                    f"{at[0] + 1}..{chain.last} were written after it")


def _topic_heads(report: Findings, anchors: Anchors, chain: Chain) -> None:
    where = f"topic {anchors.heads_topic}"
    heads = anchors.heads or []
    if chain.archive_id is None:
        report.fail("anchor", where, "archive.json names no archive_id (made before heads were "
                    "anchored, or replaced): no head can be looked up for it")
        return
    if not heads:
        report.fail("anchor", where, f"no head of archive {chain.archive_id}: it was never "
                    "published (the archive was written without the topic, or by another "
                    "cluster or prefix), or archive.json is not the original")
        return
    # Without a trusted key, heads of one archive signed by different keys (or some unsigned)
    # mean someone besides the writer published one: the latest proves nothing then.
    keys = {signed.get("key_id") for signed in heads if signed is not None}
    if anchors.public_key is None and len(keys) > 1:
        report.fail("anchor", where, f"the heads of archive {chain.archive_id} are signed by "
                    f"{len(keys)} different keys ({', '.join(sorted(map(str, keys)))}, None: "
                    "unsigned); give --public-key to say which is yours")
    good: dict[str, Any] | None = None
    for position, signed in enumerate(heads):
        label = f"{where} head {position + 1} of {len(heads)}"
        if signed is None:
            report.fail("anchor", label, "not a signed head (not JSON of one)")
        elif _signed(report, "anchor", label, signed, anchors.public_key):
            good = signed
    if good is not None:
        compare_head(report, "anchor", where, good["head"], chain)


def _digests(report: Findings, folder: Path, trusted: Ed25519PublicKey | None,
             chain: Chain) -> None:
    where = f"digests {folder}"
    digests, bad = read_digests(folder)
    for path in bad:
        report.fail("digests", path, "not a digest file (not JSON of a signed head)")
    if not digests:
        report.fail("digests", where, "no digest files (DIR/<hour>/<checkpoint>.json)")
        return
    first = digests[0]
    if first.head.get("previous_digest") is not None:
        report.note("digests", str(first.path), f"the chain starts at checkpoint "
                    f"{first.head.get('checkpoint')}: the digests before it are not in {folder}")
    keys = {d.signed.get("key_id") for d in digests}
    if trusted is None and len(keys) > 1:
        report.fail("digests", where, f"signed by {len(keys)} different keys "
                    f"({', '.join(sorted(map(str, keys)))}); give --public-key to say which is "
                    "yours")
    previous: Digest | None = None
    for digest in digests:
        _signed(report, "digests", str(digest.path), digest.signed, trusted)
        if previous is not None and digest.head.get("previous_digest") != previous.sha256:
            report.fail("digests", str(digest.path),
                        f"the digest of checkpoint {digest.head.get('checkpoint')} does not name "
                        f"the one of checkpoint {previous.head.get('checkpoint')} as its "
                        "previous: a digest between them was deleted, or one of them changed")
        previous = digest
    # Every digest's head must be in the archive; the first that is not says what happened.
    mismatched = 0
    for digest in digests:
        if not compare_head(_Quiet(), "digests", str(digest.path), digest.head, chain):
            mismatched += 1
            if mismatched == 1:
                compare_head(report, "digests", str(digest.path), digest.head, chain)
    if mismatched > 1:
        report.fail("digests", where, f"{mismatched} of {len(digests)} digests name heads this "
                    "archive does not hold")
    last = digests[-1]
    if not mismatched and chain.last > last.head.get("chain_index", -1):
        compare_head(report, "digests", str(last.path), last.head, chain)  # the note


class _Quiet:
    def fail(self, check: str, where: str, message: str) -> None:
        pass

    def note(self, check: str, where: str, message: str) -> None:
        pass

