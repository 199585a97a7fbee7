"""How every Kafka client of modelevents authenticates and encrypts: TLS and SASL settings.

One value, :class:`KafkaSecurity`, read from the environment and carried by
:class:`~modelevents.services.kafka.settings.PipelineSettings`, so that producers, consumers,
topic administration and the Faust worker all connect the same way::

    KAFKA_SECURITY_PROTOCOL     PLAINTEXT (default) | SSL | SASL_PLAINTEXT | SASL_SSL
    KAFKA_SASL_MECHANISM        PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512 (SASL_* protocols only)
    KAFKA_SASL_USERNAME         the SASL user
    KAFKA_SASL_PASSWORD         its password, or KAFKA_SASL_PASSWORD_FILE: a file holding it
                                (a mounted secret; setting both is an error)
    KAFKA_SSL_CAFILE            PEM CA bundle the brokers' certificates are checked against
                                (default: the system's CAs)
    KAFKA_SSL_CERTFILE          PEM client certificate (mutual TLS), with KAFKA_SSL_KEYFILE
    KAFKA_SSL_KEYFILE           its PEM private key
    KAFKA_SSL_PASSWORD          the key file's password, if it is encrypted (or
                                KAFKA_SSL_PASSWORD_FILE)

The same settings can come from a config file's ``kafka:`` section (services/kafka/config.py).

Contradictory or incomplete settings fail when the value is made — at the start of a command,
before any connection — with one line per problem naming the variable. The passwords are never
part of a repr, a log line or an error message.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from modelevents.schemas.errors import ConfigError
from modelevents.services.settings.sources import EnvVar, env_layer

__all__ = ["KafkaSecurity", "PROTOCOLS", "SASL_MECHANISMS", "ENV_HELP", "SECURITY_ENV"]

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")

ENV_HELP = ("KAFKA_SECURITY_PROTOCOL (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL), "
            "KAFKA_SASL_MECHANISM (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512), KAFKA_SASL_USERNAME, "
            "KAFKA_SASL_PASSWORD or KAFKA_SASL_PASSWORD_FILE, KAFKA_SSL_CAFILE, "
            "KAFKA_SSL_CERTFILE and KAFKA_SSL_KEYFILE (PEM), KAFKA_SSL_PASSWORD or "
            "KAFKA_SSL_PASSWORD_FILE (an encrypted key's)")

# KafkaSecurity's fields and their variables; the secrets may be given as NAME_FILE.
SECURITY_ENV: tuple[EnvVar, ...] = (
    EnvVar(("KAFKA_SECURITY_PROTOCOL",), ("protocol",)),
    EnvVar(("KAFKA_SASL_MECHANISM",), ("sasl_mechanism",)),
    EnvVar(("KAFKA_SASL_USERNAME",), ("sasl_username",)),
    EnvVar(("KAFKA_SASL_PASSWORD",), ("sasl_password",), secret=True),
    EnvVar(("KAFKA_SSL_CAFILE",), ("ssl_cafile",)),
    EnvVar(("KAFKA_SSL_CERTFILE",), ("ssl_certfile",)),
    EnvVar(("KAFKA_SSL_KEYFILE",), ("ssl_keyfile",)),
    EnvVar(("KAFKA_SSL_PASSWORD",), ("ssl_password",), secret=True),
)


@dataclass(frozen=True)
class KafkaSecurity:
    """The security protocol, SASL credentials and TLS files of every Kafka client.

    ``client_options()`` gives the keyword arguments of aiokafka's clients; the worker turns the
    same value into Faust's ``broker_credentials`` (services/processor/app.py).
    """

    protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_password: str | None = field(default=None, repr=False)
    # Built (and so checked) once, from the files above.
    _context: ssl.SSLContext | None = field(default=None, init=False, repr=False, compare=False)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> KafkaSecurity:
        layer = env_layer(os.environ if env is None else env, SECURITY_ENV)
        if layer.problems:
            raise ConfigError("\n".join(layer.problems))
        return cls(**layer.values)

    def __post_init__(self) -> None:
        object.__setattr__(self, "protocol", self.protocol.strip().upper())
        if self.sasl_mechanism is not None:
            object.__setattr__(self, "sasl_mechanism", self.sasl_mechanism.strip().upper())
        problems = self._problems()
        if not problems and self.uses_tls:
            try:
                object.__setattr__(self, "_context", self._make_context())
            except (ssl.SSLError, OSError, ValueError) as exc:
                problems.append(f"KAFKA_SSL_*: the TLS files cannot be loaded ({exc}); they must "
                                f"be PEM files, the key matching the certificate (and "
                                f"KAFKA_SSL_PASSWORD its password if it is encrypted)")
        if problems:
            raise ConfigError("invalid Kafka security settings:\n" + "\n".join(problems))

    def _problems(self) -> list[str]:
        problems: list[str] = []
        if self.protocol not in PROTOCOLS:
            problems.append(f"KAFKA_SECURITY_PROTOCOL={self.protocol}: not a protocol; use one "
                            f"of {', '.join(PROTOCOLS)}")
            return problems
        if self.uses_sasl:
            if self.sasl_mechanism is None:
                problems.append(f"KAFKA_SECURITY_PROTOCOL={self.protocol} needs "
                                f"KAFKA_SASL_MECHANISM ({', '.join(SASL_MECHANISMS)})")
            elif self.sasl_mechanism not in SASL_MECHANISMS:
                problems.append(f"KAFKA_SASL_MECHANISM={self.sasl_mechanism}: not supported; use "
                                f"one of {', '.join(SASL_MECHANISMS)}")
            if not self.sasl_username:
                problems.append(f"KAFKA_SECURITY_PROTOCOL={self.protocol} needs KAFKA_SASL_USERNAME")
            if not self.sasl_password:
                problems.append(f"KAFKA_SECURITY_PROTOCOL={self.protocol} needs "
                                f"KAFKA_SASL_PASSWORD or KAFKA_SASL_PASSWORD_FILE")
        else:
            given = [name for name, value in (("KAFKA_SASL_MECHANISM", self.sasl_mechanism),
                                              ("KAFKA_SASL_USERNAME", self.sasl_username),
                                              ("KAFKA_SASL_PASSWORD", self.sasl_password))
                     if value]
            if given:
                problems.append(f"{', '.join(given)} set but KAFKA_SECURITY_PROTOCOL="
                                f"{self.protocol}: use SASL_SSL (or SASL_PLAINTEXT) to authenticate")
        files = {"KAFKA_SSL_CAFILE": self.ssl_cafile, "KAFKA_SSL_CERTFILE": self.ssl_certfile,
                 "KAFKA_SSL_KEYFILE": self.ssl_keyfile}
        if not self.uses_tls:
            given = [name for name, value in files.items() if value]
            if self.ssl_password:
                given.append("KAFKA_SSL_PASSWORD")
            if given:
                problems.append(f"{', '.join(given)} set but KAFKA_SECURITY_PROTOCOL="
                                f"{self.protocol} does not use TLS: use SSL or SASL_SSL")
            return problems
        for name, path in files.items():
            if path is not None and not os.path.isfile(path):
                problems.append(f"{name}={path}: no such file")
        if self.ssl_password and not self.ssl_keyfile:
            problems.append("KAFKA_SSL_PASSWORD set without KAFKA_SSL_KEYFILE (the key it opens)")
        if self.ssl_keyfile and not self.ssl_certfile:
            problems.append("KAFKA_SSL_KEYFILE set without KAFKA_SSL_CERTFILE (the client "
                            "certificate it belongs to)")
        return problems

    @property
    def uses_sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    def _make_context(self) -> ssl.SSLContext:
        # Verify the brokers' certificates and host names: against the given CA or the system's.
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=self.ssl_cafile)
        if self.ssl_certfile:
            # Never None: OpenSSL would then ask for an encrypted key's password on the terminal.
            context.load_cert_chain(self.ssl_certfile, self.ssl_keyfile,
                                    self.ssl_password or (lambda: ""))
        return context

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context of every client (None without TLS)."""
        return self._context

    def client_options(self) -> dict[str, Any]:
        """Keyword arguments for aiokafka's producer, consumer and admin client."""
        options: dict[str, Any] = {"security_protocol": self.protocol}
        if self._context is not None:
            options["ssl_context"] = self._context
        if self.uses_sasl:
            options.update(sasl_mechanism=self.sasl_mechanism,
                           sasl_plain_username=self.sasl_username,
                           sasl_plain_password=self.sasl_password)
        return options

    def describe(self) -> str:
        """A line for logs and errors: protocol, mechanism and user — never the password."""
        if self.uses_sasl:
            return f"{self.protocol} ({self.sasl_mechanism} as {self.sasl_username})"
        return self.protocol
