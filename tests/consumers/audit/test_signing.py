"""The Ed25519 helpers that sign the audit archive's heads (consumers/audit/signing.py): keys
from PEM or a raw seed, keygen's private file, signatures that hold only for the head signed and
only against the key that signed it."""

from __future__ import annotations

import base64
import stat
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from modelevents.consumers.audit.signing import (
    load_public_key,
    load_signing_key,
    public_bytes,
    sign,
    signature_problem,
    write_keypair,
)
from modelevents.consumers.errors import AuditError

HEAD = {"archive_id": "a1", "checkpoint": 3, "chain_index": 9, "hash": "ab" * 32,
        "records": {"t.events:0": 40}}


def test_a_signature_holds_for_its_head_and_its_key_only() -> None:
    mine, other = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    signed = sign(HEAD, mine)
    assert signature_problem(signed, mine.public_key()) is None
    assert signature_problem(signed, None) is None  # integrity against the key it names
    assert "signed by another key" in signature_problem(signed, other.public_key())
    longer = {**signed, "head": {**HEAD, "chain_index": 10}}
    assert "does not match the head" in signature_problem(longer, mine.public_key())
    assert "does not match the head" in signature_problem(longer, None)
    # Re-signed by someone else, naming their own key: only a trusted key tells.
    forged = sign(longer["head"], other)
    assert signature_problem(forged, None) is None
    assert "signed by another key" in signature_problem(forged, mine.public_key())


def test_an_unsigned_head_fails_only_against_a_trusted_key() -> None:
    unsigned = sign(HEAD, None)
    assert unsigned["signature"] is None
    assert signature_problem(unsigned, None) is None
    assert "not signed" in signature_problem(unsigned,
                                             Ed25519PrivateKey.generate().public_key())


def test_keygen_writes_a_private_pem_never_over_a_key(tmp_path: Path) -> None:
    path = tmp_path / "audit.key"
    public = write_keypair(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert public_bytes(load_signing_key(path).public_key()) == public_bytes(public)
    assert public_bytes(load_public_key(Path(f"{path}.pub"))) == public_bytes(public)
    before = path.read_bytes()
    with pytest.raises(AuditError, match="never overwritten"):
        write_keypair(path)
    assert path.read_bytes() == before


def test_keys_load_from_a_raw_seed_and_from_printed_text(tmp_path: Path) -> None:
    seed = bytes(range(32))
    (tmp_path / "seed").write_bytes(seed)
    key = load_signing_key(tmp_path / "seed")
    raw = public_bytes(key.public_key())
    assert raw == public_bytes(Ed25519PrivateKey.from_private_bytes(seed).public_key())
    for name, text in (("b64", base64.b64encode(raw) + b"\n"), ("hex", raw.hex().encode())):
        (tmp_path / name).write_bytes(text)
        assert public_bytes(load_public_key(tmp_path / name)) == raw
    (tmp_path / "junk").write_bytes(b"not a key at all")
    with pytest.raises(AuditError, match="audit keygen"):
        load_signing_key(tmp_path / "junk")
    with pytest.raises(AuditError, match="not an Ed25519 public key"):
        load_public_key(tmp_path / "junk")
    with pytest.raises(AuditError, match="cannot read"):
        load_signing_key(tmp_path / "missing")
