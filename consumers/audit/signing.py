"""Ed25519 keys and signatures of the audit archive's heads (``docs/audit.md``, "Anchoring").

    key = load_signing_key(Path("audit.key"))       # PEM (PKCS#8) or the raw 32-byte seed
    signed = sign(head, key)                         # {"head", "signature", "public_key", "key_id"}
    problem = signature_problem(signed, trusted)     # None when it holds; else what is wrong
    public = write_keypair(Path("audit.key"))        # keygen: private key 0600, FILE.pub beside

What is signed is the head's canonical JSON (keys sorted, no whitespace, UTF-8); the public key
travels with the signature as base64 of its 32 raw bytes, its ``key_id`` the first 16 hex digits
of their SHA-256. A signature proves who signed only against a key the verifier already trusts
(``--public-key``): the key a head names for itself is whoever made it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from modelevents.consumers.errors import AuditError

_RAW = serialization.Encoding.Raw
_RAW_PUBLIC = serialization.PublicFormat.Raw


def canonical(obj: Any) -> bytes:
    """The bytes a head is signed over: JSON, keys sorted, no whitespace."""
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)


def public_bytes(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(_RAW, _RAW_PUBLIC)


def key_id(key: Ed25519PublicKey) -> str:
    return hashlib.sha256(public_bytes(key)).hexdigest()[:16]


def public_text(key: Ed25519PublicKey) -> str:
    """The public key as heads carry it and ``audit keygen`` prints it: base64 of 32 bytes."""
    return base64.b64encode(public_bytes(key)).decode()


def _read_pem(path: Path, what: str, load: Callable[[bytes], Any],
              kind: type) -> tuple[bytes, Any]:
    """The file's bytes, and the key of ``kind`` when the file is PEM (else None)."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise AuditError(f"cannot read the {what} {path}: {exc.strerror}") from exc
    if not data.lstrip().startswith(b"-----BEGIN"):
        return data, None
    try:
        key = load(data)
    except (ValueError, TypeError) as exc:
        raise AuditError(f"{path} is not an unencrypted PEM {what} ({exc})") from exc
    if not isinstance(key, kind):
        raise AuditError(f"{path} holds a {type(key).__name__}, not an Ed25519 {what}; make "
                         "a key pair with `modelevents audit keygen --out FILE`")
    return data, key


def load_signing_key(path: Path) -> Ed25519PrivateKey:
    """An Ed25519 private key from a PEM file or a file of its raw 32-byte seed."""
    data, key = _read_pem(path, "signing key",
                          lambda d: serialization.load_pem_private_key(d, password=None),
                          Ed25519PrivateKey)
    if key is not None:
        return key
    if len(data) == 32:
        return Ed25519PrivateKey.from_private_bytes(data)
    raise AuditError(f"{path} is neither a PEM private key nor a raw 32-byte Ed25519 seed "
                     f"({len(data)} bytes); make one with `modelevents audit keygen --out FILE`")


def load_public_key(path: Path) -> Ed25519PublicKey:
    """An Ed25519 public key from a PEM file, its 32 raw bytes, or their base64 or hex text."""
    data, key = _read_pem(path, "public key", serialization.load_pem_public_key,
                          Ed25519PublicKey)
    if key is not None:
        return key
    raw = data if len(data) == 32 else _text_key(data.strip())
    if raw is None:
        raise AuditError(f"{path} is not an Ed25519 public key (PEM, 32 raw bytes, or their "
                         "base64 or hex as `modelevents audit keygen` prints it)")
    return Ed25519PublicKey.from_public_bytes(raw)


def _text_key(text: bytes) -> bytes | None:
    for decode in (base64.b64decode, binascii.unhexlify):
        try:
            raw = decode(text)
        except (ValueError, binascii.Error):
            continue
        if len(raw) == 32:
            return raw
    return None


def write_keypair(path: Path) -> Ed25519PublicKey:
    """A new private key in ``path`` (PEM, mode 0600, never over an existing file) and its public
    key in ``path`` + ``.pub`` (PEM); returns the public key."""
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise AuditError(f"{path} exists; a key is never overwritten (choose another --out)") \
            from None
    with os.fdopen(fd, "wb") as out:
        out.write(pem)
    public = key.public_key()
    Path(f"{path}.pub").write_bytes(public.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    return public


def sign(head: dict[str, Any], key: Ed25519PrivateKey | None) -> dict[str, Any]:
    """The head with its signature (``None`` fields without a key: an unsigned head)."""
    if key is None:
        return {"head": head, "signature": None, "public_key": None, "key_id": None}
    public = key.public_key()
    return {"head": head, "signature": base64.b64encode(key.sign(canonical(head))).decode(),
            "public_key": public_text(public), "key_id": key_id(public)}


def signature_problem(signed: dict[str, Any], trusted: Ed25519PublicKey | None) -> str | None:
    """What is wrong with a signed head's signature, or None when it holds — against ``trusted``
    when given, else against the key the head names (which proves integrity, not who signed)."""
    if not signed.get("signature"):
        return "not signed (the archive was written without --signing-key)" \
            if trusted is not None else None
    try:
        named = Ed25519PublicKey.from_public_bytes(base64.b64decode(signed["public_key"]))
        signature = base64.b64decode(signed["signature"])
    except (KeyError, TypeError, ValueError, binascii.Error):
        return "its signature or public key is not base64 of an Ed25519 key and signature"
    if trusted is not None and public_bytes(named) != public_bytes(trusted):
        return (f"signed by another key (key id {key_id(named)}), not the one given "
                f"(key id {key_id(trusted)})")
    try:
        named.verify(signature, canonical(signed.get("head")))
    except InvalidSignature:
        return (f"the signature does not match the head (key id {key_id(named)}): the head was "
                "changed after it was signed")
    return None
