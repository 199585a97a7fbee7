"""A throw-away certificate authority for the TLS tests: a CA, a server certificate for
127.0.0.1 / localhost (what the local broker's TLS listener presents) and a client certificate
(mutual TLS), all PEM, keys unencrypted PKCS#8 (what Kafka's PEM key store reads)."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class TLSFiles:
    ca: Path  # the CA certificate: what KAFKA_SSL_CAFILE names
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    ca_name: str


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def make_tls_files(directory: Path, ca_name: str = "modelevents test CA") -> TLSFiles:
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    validity = (now - datetime.timedelta(days=1), now + datetime.timedelta(days=30))
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (x509.CertificateBuilder().subject_name(_name(ca_name)).issuer_name(_name(ca_name))
               .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(validity[0]).not_valid_after(validity[1])
               .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True,
                                            crl_sign=True, content_commitment=False,
                                            key_encipherment=False, data_encipherment=False,
                                            key_agreement=False, encipher_only=False,
                                            decipher_only=False), critical=True)
               .sign(ca_key, hashes.SHA256()))

    def leaf(common_name: str, usage: x509.ObjectIdentifier, sans: list[x509.GeneralName],
             ) -> tuple[bytes, bytes]:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (x509.CertificateBuilder().subject_name(_name(common_name))
                   .issuer_name(ca_cert.subject).public_key(key.public_key())
                   .serial_number(x509.random_serial_number())
                   .not_valid_before(validity[0]).not_valid_after(validity[1])
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.ExtendedKeyUsage([usage]), critical=False))
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(ca_key, hashes.SHA256())
        return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)

    server_cert, server_key = leaf("127.0.0.1", ExtendedKeyUsageOID.SERVER_AUTH,
                                   [x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                                    x509.DNSName("localhost")])
    client_cert, client_key = leaf("modelevents-client", ExtendedKeyUsageOID.CLIENT_AUTH, [])
    files = TLSFiles(directory / "ca.pem", directory / "server.pem", directory / "server.key",
                     directory / "client.pem", directory / "client.key", ca_name)
    files.ca.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    files.server_cert.write_bytes(server_cert)
    files.server_key.write_bytes(server_key)
    files.client_cert.write_bytes(client_cert)
    files.client_key.write_bytes(client_key)
    return files
