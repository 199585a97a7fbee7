"""The project's own local Apache Kafka broker: one KRaft node (broker + controller) on 127.0.0.1.

There is no Docker here, so the broker is assembled from Maven Central: a throw-away ``pom.xml``
names ``org.apache.kafka:kafka_2.13`` plus a log4j2 SLF4J binding (without it Kafka 4 runs
silently, KAFKA-18466) and ``mvn dependency:copy-dependencies`` copies the whole runtime
classpath into a per-version cache. The broker then runs as a detached JVM with a bounded heap.

Public API::

    settings = LocalBrokerSettings(port=19092)       # every field has a sensible default
    ensure_jars(settings, progress=print)      # -> Path of the cached libs/ dir
    result = start(settings)                   # -> StartResult (no-op if already running)
    status(settings)                           # -> KafkaStatus
    stop(settings)                             # -> bool (True if a broker was stopped)
    bootstrap_servers(settings)                # -> "127.0.0.1:19092" or $KAFKA_BOOTSTRAP_SERVERS

If ``KAFKA_BOOTSTRAP_SERVERS`` is set, :func:`start` starts nothing and returns that address, so
tests and services run unchanged against an external cluster (or the docker-compose one).

Files::

    ${XDG_CACHE_HOME:-~/.cache}/modelevents/kafka/<version>/libs/     jars (kept between runs)
    ${XDG_STATE_HOME:-~/.local/state}/modelevents/kafka/<port>/       (services/settings/xdg.py)
        data/  logs/server.log  server.properties  log4j2.properties  kafka.pid

Errors are :class:`KafkaSetupError` subclasses whose message says what to do next.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import errno
import fcntl
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from modelevents.services.errors import (
    BrokerStartError,
    BrokerStartTimeout,
    JarDownloadError,
    KafkaSetupError,
    MissingToolError,
    PortInUseError,
    StorageFormatError,
)
from modelevents.services.kafka.local_broker_address import (
    ENV_BOOTSTRAP,
    ENV_LOCAL_PORT,
    LOCAL_HOST,
    LOCAL_PORT,
)
from modelevents.services.settings.xdg import cache_dir, state_dir

__all__ = [
    "DEFAULT_VERSION",
    "DEFAULT_PORT",
    "LocalBrokerSettings",
    "StartResult",
    "KafkaStatus",
    "KafkaSetupError",
    "MissingToolError",
    "JarDownloadError",
    "PortInUseError",
    "StorageFormatError",
    "BrokerStartError",
    "BrokerStartTimeout",
    "ensure_jars",
    "start",
    "stop",
    "status",
    "bootstrap_servers",
    "replace",
]

DEFAULT_VERSION = "4.1.1"
# log4j2 line that Kafka 4.1 itself is built against; all three artifacts use this one version.
LOG4J_VERSION = "2.24.3"
DEPENDENCY_PLUGIN_VERSION = "3.8.1"  # Maven 3.8.7 would otherwise bind the ancient 2.8

# Where the broker listens by default is the pipeline settings' default bootstrap.
ENV_PORT, DEFAULT_PORT = ENV_LOCAL_PORT, LOCAL_PORT
ENV_CONTROLLER_PORT = "MODELEVENTS_KAFKA_CONTROLLER_PORT"
ENV_VERSION = "MODELEVENTS_KAFKA_VERSION"
ENV_HEAP = "MODELEVENTS_KAFKA_HEAP"
ENV_JVM_OPTS = "MODELEVENTS_KAFKA_JVM_OPTS"

Progress = Callable[[str], None]


# --------------------------------------------------------------------------------------------
# Settings and results
# --------------------------------------------------------------------------------------------


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise KafkaSetupError(f"{name}={raw!r} is not a port number; set it to an integer such as 19092") from None


@dataclass(frozen=True)
class LocalBrokerSettings:
    """Where and how the local broker runs. Defaults come from the environment at construction.

    ``controller_port`` defaults to ``port + 1``; ``heap`` is the JVM's ``-Xmx`` (e.g. ``512m``).
    """

    version: str = field(default_factory=lambda: os.environ.get(ENV_VERSION, "").strip() or DEFAULT_VERSION)
    host: str = LOCAL_HOST
    port: int = field(default_factory=lambda: _env_int(ENV_PORT, DEFAULT_PORT))
    controller_port: int | None = field(default_factory=lambda: _env_int(ENV_CONTROLLER_PORT, 0) or None)
    heap: str = field(default_factory=lambda: os.environ.get(ENV_HEAP, "").strip() or "512m")
    num_partitions: int = 1
    start_timeout: float = 90.0
    stop_timeout: float = 30.0
    # The per-user homes of services/settings/xdg.py (a relative XDG_*_HOME is ignored).
    cache_root: Path = field(default_factory=lambda: cache_dir("kafka"))
    state_root: Path = field(default_factory=lambda: state_dir("kafka"))
    extra_properties: dict[str, str] = field(default_factory=dict)
    jvm_opts: tuple[str, ...] = field(default_factory=lambda: tuple(shlex.split(os.environ.get(ENV_JVM_OPTS, ""))))
    # Optional authenticated and encrypted listeners beside the plaintext one (what a real
    # cluster asks of clients; the tests of services/kafka/security.py use them):
    # a SASL_PLAINTEXT listener on sasl_port taking PLAIN for sasl_users (user → password) and
    # SCRAM-SHA-256/512 for scram_users (their credentials written into the metadata when the
    # storage is formatted), an SSL listener on ssl_port presenting the PEM certificate
    # chain and unencrypted private key of ssl_server_cert / ssl_server_key (and, with
    # ssl_client_ca, requiring client certificates that CA signed: mutual TLS), and a SASL_SSL
    # listener on sasl_ssl_port (the same users over the same certificate).
    sasl_port: int | None = None
    sasl_users: dict[str, str] = field(default_factory=dict)
    scram_users: dict[str, str] = field(default_factory=dict)
    ssl_port: int | None = None
    ssl_server_cert: Path | None = None
    ssl_server_key: Path | None = None
    ssl_client_ca: Path | None = None
    sasl_ssl_port: int | None = None

    def __post_init__(self) -> None:
        controller_port = self.controller_port
        if controller_port is None:
            controller_port = self.port + 1
            object.__setattr__(self, "controller_port", controller_port)
        if not re.fullmatch(r"\d+\.\d+\.\d+", self.version):
            raise KafkaSetupError(f"Kafka version {self.version!r} is not of the form X.Y.Z (e.g. {DEFAULT_VERSION})")
        if not re.fullmatch(r"\d+[mMgG]", self.heap):
            raise KafkaSetupError(f"heap {self.heap!r} is not a JVM size such as 512m or 1g")
        ports = [p for p in (self.port, controller_port, *self._listener_ports) if p is not None]
        for p in ports:
            if not 0 < p < 65536:
                raise KafkaSetupError(f"port {p} is outside 1-65535")
        if self.port == self.controller_port:
            raise KafkaSetupError(f"broker and controller ports must differ (both {self.port})")
        if len(set(ports)) != len(ports):
            raise KafkaSetupError(f"the broker's listeners need ports of their own (given {ports})")
        if (self.sasl_port or self.sasl_ssl_port) and not (self.sasl_users or self.scram_users):
            raise KafkaSetupError("a SASL listener (sasl_port, sasl_ssl_port) needs sasl_users or scram_users")
        if (self.ssl_port or self.sasl_ssl_port) and not (self.ssl_server_cert and self.ssl_server_key):
            raise KafkaSetupError("a TLS listener (ssl_port, sasl_ssl_port) needs ssl_server_cert and "
                                  "ssl_server_key")
        for name in (*self.sasl_users, *self.scram_users):
            if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
                raise KafkaSetupError(f"SASL user name {name!r}: use letters, digits, _ . - only")

    # -- paths ------------------------------------------------------------------------------
    @property
    def version_dir(self) -> Path:
        return Path(self.cache_root) / self.version

    @property
    def libs_dir(self) -> Path:
        return self.version_dir / "libs"

    @property
    def state_dir(self) -> Path:
        return Path(self.state_root) / str(self.port)

    @property
    def data_dir(self) -> Path:
        return self.state_dir / "data"

    @property
    def logs_dir(self) -> Path:
        return self.state_dir / "logs"

    @property
    def log_file(self) -> Path:
        return self.logs_dir / "server.log"

    @property
    def properties_file(self) -> Path:
        return self.state_dir / "server.properties"

    @property
    def log4j_file(self) -> Path:
        return self.state_dir / "log4j2.properties"

    @property
    def pid_file(self) -> Path:
        return self.state_dir / "kafka.pid"

    @property
    def local_bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def _listener_ports(self) -> tuple[int | None, ...]:
        return (self.sasl_port, self.ssl_port, self.sasl_ssl_port)

    @property
    def sasl_bootstrap(self) -> str | None:
        """The SASL_PLAINTEXT listener's address (None without one)."""
        return None if self.sasl_port is None else f"{self.host}:{self.sasl_port}"

    @property
    def ssl_bootstrap(self) -> str | None:
        """The SSL listener's address (None without one)."""
        return None if self.ssl_port is None else f"{self.host}:{self.ssl_port}"

    @property
    def sasl_ssl_bootstrap(self) -> str | None:
        """The SASL_SSL listener's address (None without one)."""
        return None if self.sasl_ssl_port is None else f"{self.host}:{self.sasl_ssl_port}"

    @property
    def ssl_keystore_file(self) -> Path:
        return self.state_dir / "server-keystore.pem"


@dataclass(frozen=True)
class StartResult:
    """What :func:`start` did. ``started`` is False when a broker was already running (or external)."""

    bootstrap_servers: str
    started: bool
    pid: int | None
    external: bool
    seconds: float


@dataclass(frozen=True)
class KafkaStatus:
    """``state`` is ``running`` (pid alive and port accepting), ``starting`` or ``stopped``."""

    state: str
    pid: int | None
    port: int
    bootstrap_servers: str
    external: bool
    version: str
    data_dir: Path
    log_file: Path

    @property
    def running(self) -> bool:
        return self.state == "running"


def bootstrap_servers(settings: LocalBrokerSettings | None = None) -> str:
    """``$KAFKA_BOOTSTRAP_SERVERS`` if set, else ``127.0.0.1:<port>`` of the local broker."""
    external = os.environ.get(ENV_BOOTSTRAP, "").strip()
    if external:
        return external
    return (settings or LocalBrokerSettings()).local_bootstrap


def _external() -> str | None:
    return os.environ.get(ENV_BOOTSTRAP, "").strip() or None


def _noop(_: str) -> None:
    pass


# --------------------------------------------------------------------------------------------
# Tools and jars
# --------------------------------------------------------------------------------------------

_INSTALL_HINT = "install it (Debian/Ubuntu: `apt-get install -y openjdk-17-jre-headless maven`) and retry"


def _java() -> str:
    home = os.environ.get("JAVA_HOME", "").strip()
    if home and os.access(Path(home) / "bin" / "java", os.X_OK):
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if not found:
        raise MissingToolError(f"`java` was not found on PATH; Kafka 4 needs Java 17 or newer: {_INSTALL_HINT}")
    return found


def _mvn() -> str:
    found = shutil.which("mvn")
    if not found:
        raise MissingToolError(
            f"`mvn` (Apache Maven) was not found on PATH; it fetches the Kafka broker jars "
            f"from Maven Central on first use: {_INSTALL_HINT}"
        )
    return found


_java_checked: dict[str, int] = {}


def _check_java_version(java: str) -> None:
    if java in _java_checked:
        return
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60).stderr
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise MissingToolError(f"`{java} -version` failed ({exc}); {_INSTALL_HINT}") from exc
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if m:
        major = int(m.group(1)) if m.group(1) != "1" else int(m.group(2) or 0)
        if major < 17:
            raise MissingToolError(f"{java} is Java {major}; Kafka 4 needs Java 17 or newer: {_INSTALL_HINT}")
        _java_checked[java] = major


def _pom(version: str) -> str:
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<!-- Written by modelevents.services.local.kafka_broker, only to obtain Kafka's runtime jars. -->
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.modelevents</groupId>
  <artifactId>kafka-runtime</artifactId>
  <version>{version}</version>
  <packaging>pom</packaging>
  <properties>
    <kafka.version>{version}</kafka.version>
    <log4j.version>{LOG4J_VERSION}</log4j.version>
  </properties>
  <dependencyManagement>
    <dependencies>
      <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-api</artifactId><version>${{log4j.version}}</version></dependency>
      <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-core</artifactId><version>${{log4j.version}}</version></dependency>
      <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId><version>${{log4j.version}}</version></dependency>
    </dependencies>
  </dependencyManagement>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>${{kafka.version}}</version></dependency>
    <!-- Kafka 4 publishes no SLF4J provider in its POM (KAFKA-18466): without these the broker logs nothing. -->
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-api</artifactId></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-core</artifactId></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId></dependency>
  </dependencies>
  <build>
    <plugins>
      <plugin>
        <groupId>org.apache.maven.plugins</groupId>
        <artifactId>maven-dependency-plugin</artifactId>
        <version>{DEPENDENCY_PLUGIN_VERSION}</version>
      </plugin>
    </plugins>
  </build>
</project>
"""


_COMPLETE_MARKER = ".complete"


def _jars_complete(libs: Path, version: str) -> bool:
    return (libs / _COMPLETE_MARKER).is_file() and (libs / f"kafka_2.13-{version}.jar").is_file()


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """Exclusive advisory lock (serializes concurrent starts / downloads, e.g. pytest-xdist workers)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def ensure_jars(settings: LocalBrokerSettings | None = None, progress: Progress | None = None) -> Path:
    """Make sure the broker's jars for ``settings.version`` are cached; return the libs directory.

    The first call runs Maven (Kafka 4.1.1: 46 jars, 43 MB, plus ~64 MB in ``~/.m2``; about
    10 s on a fast link); later calls only check the cache. The download goes to a temporary directory that is renamed
    into place when complete, so an interrupted download is never mistaken for a complete one.
    """
    settings = settings or LocalBrokerSettings()
    progress = progress or _noop
    libs = settings.libs_dir
    if _jars_complete(libs, settings.version):
        return libs
    java = _java()
    _check_java_version(java)
    mvn = _mvn()
    vdir = settings.version_dir
    vdir.mkdir(parents=True, exist_ok=True)
    with _file_lock(vdir / ".lock"):
        if _jars_complete(libs, settings.version):  # another process finished meanwhile
            return libs
        for stale in vdir.glob("libs.partial-*"):  # left by a killed download; we hold the lock
            shutil.rmtree(stale, ignore_errors=True)
        progress(f"fetching Kafka {settings.version} jars with Maven (first run only) ...")
        pom = vdir / "pom.xml"
        pom.write_text(_pom(settings.version))
        tmp = Path(tempfile.mkdtemp(prefix="libs.partial-", dir=vdir))
        try:
            cmd = [
                mvn, "-B", "-q", "-f", str(pom),
                "dependency:copy-dependencies",
                f"-DoutputDirectory={tmp}",
                "-DincludeScope=runtime",
            ]  # fmt: skip
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, cwd=vdir)
            except subprocess.TimeoutExpired as exc:
                raise JarDownloadError(
                    "Maven did not finish fetching the Kafka jars within 30 minutes; check that Maven Central "
                    "is reachable (proxy settings in ~/.m2/settings.xml) and retry"
                ) from exc
            if proc.returncode != 0:
                out = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-25:])
                raise JarDownloadError(
                    f"`mvn dependency:copy-dependencies` failed (exit {proc.returncode}) for "
                    f"org.apache.kafka:kafka_2.13:{settings.version}. Check the version exists on Maven Central "
                    f"and that Maven can reach it (proxy settings in ~/.m2/settings.xml), then retry.\n{out}"
                )
            needed = [f"kafka_2.13-{settings.version}.jar", f"log4j-slf4j-impl-{LOG4J_VERSION}.jar",
                      f"log4j-core-{LOG4J_VERSION}.jar"]  # fmt: skip
            missing = [n for n in needed if not (tmp / n).is_file()]
            if missing:
                raise JarDownloadError(f"Maven finished but {', '.join(missing)} is missing from {tmp}; retry")
            (tmp / _COMPLETE_MARKER).write_text(f"kafka {settings.version}\nlog4j {LOG4J_VERSION}\n")
            if libs.exists():  # an old, incomplete copy (no marker): replace it
                shutil.rmtree(libs)
            os.rename(tmp, libs)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return libs


# --------------------------------------------------------------------------------------------
# Configuration files
# --------------------------------------------------------------------------------------------


_SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def _jaas_value(text: str) -> str:
    # A JAAS option value is a double-quoted string.
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _listener_properties(s: LocalBrokerSettings) -> dict[str, Any]:
    """The client listeners: PLAINTEXT always (brokers and controller talk over it too), SASL
    (SASL_PLAINTEXT), SSL and SASL_SSL when their ports are set."""
    listeners = {"PLAINTEXT": s.port, "SASL": s.sasl_port, "SSL": s.ssl_port, "SASL_SSL": s.sasl_ssl_port}
    protocols = {"PLAINTEXT": "PLAINTEXT", "SASL": "SASL_PLAINTEXT", "SSL": "SSL", "SASL_SSL": "SASL_SSL"}
    used = {name: port for name, port in listeners.items() if port is not None}
    client = ",".join(f"{name}://{s.host}:{port}" for name, port in used.items())
    props: dict[str, Any] = {
        "listeners": f"{client},CONTROLLER://{s.host}:{s.controller_port}",
        "advertised.listeners": client,
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": ",".join(
            ["CONTROLLER:PLAINTEXT", *(f"{name}:{protocols[name]}" for name in used)]),
    }
    mechanisms = (["PLAIN"] if s.sasl_users else []) + (list(_SCRAM_MECHANISMS) if s.scram_users else [])
    for name in ("SASL", "SASL_SSL"):
        if name not in used:
            continue
        prefix = f"listener.name.{name.lower()}"
        props[f"{prefix}.sasl.enabled.mechanisms"] = ",".join(mechanisms)
        if s.sasl_users:
            users = " ".join(f"user_{user}={_jaas_value(password)}" for user, password in s.sasl_users.items())
            props[f"{prefix}.plain.sasl.jaas.config"] = (
                f"org.apache.kafka.common.security.plain.PlainLoginModule required {users};")
        for mechanism in _SCRAM_MECHANISMS if s.scram_users else ():
            props[f"{prefix}.{mechanism.lower()}.sasl.jaas.config"] = (
                "org.apache.kafka.common.security.scram.ScramLoginModule required;")
    for name in ("SSL", "SASL_SSL"):
        if name not in used:
            continue
        prefix = f"listener.name.{name.lower()}"
        props[f"{prefix}.ssl.keystore.type"] = "PEM"
        props[f"{prefix}.ssl.keystore.location"] = str(s.ssl_keystore_file)
        mutual = name == "SSL" and s.ssl_client_ca is not None
        props[f"{prefix}.ssl.client.auth"] = "required" if mutual else "none"
        if mutual:
            props[f"{prefix}.ssl.truststore.type"] = "PEM"
            props[f"{prefix}.ssl.truststore.location"] = str(s.ssl_client_ca)
    return props


def _server_properties(s: LocalBrokerSettings) -> str:
    props: dict[str, Any] = {
        "process.roles": "broker,controller",
        "node.id": 1,
        # Static quorum (format without --standalone): nothing about the controller endpoint is
        # written into the metadata log, so the ports can change between runs.
        "controller.quorum.voters": f"1@{s.host}:{s.controller_port}",
        **_listener_properties(s),
        "log.dirs": str(s.data_dir),
        # Topics are created explicitly with their partition counts (docs/design-notes.md, topics
        # are explicit).
        "auto.create.topics.enable": "false",
        "num.partitions": s.num_partitions,
        "default.replication.factor": 1,
        "min.insync.replicas": 1,
        "offsets.topic.replication.factor": 1,
        "offsets.topic.num.partitions": 1,
        "transaction.state.log.replication.factor": 1,
        "transaction.state.log.min.isr": 1,
        "transaction.state.log.num.partitions": 1,
        "share.coordinator.state.topic.replication.factor": 1,
        "share.coordinator.state.topic.min.isr": 1,
        "group.initial.rebalance.delay.ms": 0,
        # Small footprint: this broker shares a 2-core machine with the tests.
        "num.network.threads": 2,
        "num.io.threads": 2,
        "background.threads": 2,
        "num.recovery.threads.per.data.dir": 1,
        "num.replica.fetchers": 1,
        "log.cleaner.threads": 1,
        "log.cleaner.dedupe.buffer.size": 16 * 1024 * 1024,
    }
    props.update(s.extra_properties)
    lines = ["# Written by modelevents.services.local.kafka_broker on every start; edits are overwritten."]
    lines += [f"{k}={v}" for k, v in props.items()]
    return "\n".join(lines) + "\n"


_LOG4J2 = """\
# Written by modelevents.services.local.kafka_broker. Everything goes to stdout, which start() sends to
# logs/server.log (the previous run's file is kept as server.log.1).
status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
# Quiet the chattiest loggers.
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.cleaner.name = kafka.log.LogCleaner
logger.cleaner.level = WARN
logger.statechange.name = state.change.logger
logger.statechange.level = WARN
logger.metadata.name = org.apache.kafka.image.loader
logger.metadata.level = WARN
"""


def _write_config(s: LocalBrokerSettings) -> None:
    s.state_dir.mkdir(parents=True, exist_ok=True)
    s.logs_dir.mkdir(parents=True, exist_ok=True)
    if s.ssl_server_cert is not None and s.ssl_server_key is not None:
        # Kafka's PEM key store file: the private key, then the certificate chain.
        _atomic_write(s.ssl_keystore_file,
                      Path(s.ssl_server_key).read_text() + Path(s.ssl_server_cert).read_text())
    _atomic_write(s.properties_file, _server_properties(s))
    _atomic_write(s.log4j_file, _LOG4J2)


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _new_cluster_id() -> str:
    """A Kafka ``Uuid`` string: 22 chars of url-safe base64 over 16 random bytes, not starting with '-'."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cid.startswith("-"):
            return cid


def _jvm_common(s: LocalBrokerSettings) -> list[str]:
    return [
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={s.log4j_file}",
        f"-Dkafka.logs.dir={s.logs_dir}",
        "-cp",
        str(s.libs_dir / "*"),  # expanded by the JVM, not a shell
    ]


def _broker_jvm_opts(s: LocalBrokerSettings) -> list[str]:
    opts = [
        f"-Xmx{s.heap}",
        "-Xms64m",
        "-Xss512k",
        "-XX:MaxMetaspaceSize=160m",
        "-XX:ReservedCodeCacheSize=96m",
        "-XX:MaxDirectMemorySize=128m",
        "-XX:MaxInlineLevel=15",
        # C1 only: about half the start time on 2 busy cores and no background C2 compiler
        # threads competing with the tests; a Python client, not the broker, is the bottleneck
        # here. Override with MODELEVENTS_KAFKA_JVM_OPTS=-XX:TieredStopAtLevel=4.
        "-XX:TieredStopAtLevel=1",
        "-XX:+ExitOnOutOfMemoryError",
    ]
    if not any(re.fullmatch(r"-XX:\+Use\w+GC", o) for o in s.jvm_opts):  # the user picked a collector
        opts += [
            "-XX:+UseG1GC",
            "-XX:MaxGCPauseMillis=20",
            "-XX:InitiatingHeapOccupancyPercent=35",
            "-XX:+ExplicitGCInvokesConcurrent",
        ]
    return opts + list(s.jvm_opts)  # last, so they win


def _format_storage(s: LocalBrokerSettings, java: str) -> None:
    meta = s.data_dir / "meta.properties"
    if meta.is_file():
        return
    if s.data_dir.exists():  # a half-made directory from an interrupted format: start over
        shutil.rmtree(s.data_dir)
    cmd = [
        java, "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", *_jvm_common(s),
        "kafka.tools.StorageTool", "format",
        "--cluster-id", _new_cluster_id(),
        "--config", str(s.properties_file),
        *(arg for name, password in s.scram_users.items() for mechanism in _SCRAM_MECHANISMS
          for arg in ("--add-scram", f"{mechanism}=[name={name},password={password}]")),
    ]  # fmt: skip
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        raise StorageFormatError(f"kafka.tools.StorageTool format took over 180 s; retry, or delete {s.data_dir}") from exc
    if proc.returncode != 0 or not meta.is_file():
        out = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-25:])
        raise StorageFormatError(
            f"formatting {s.data_dir} with kafka.tools.StorageTool failed (exit {proc.returncode}). "
            f"Delete {s.state_dir} and retry; if it fails again the jar cache may be broken: delete "
            f"{s.libs_dir}.\n{out}"
        )


# --------------------------------------------------------------------------------------------
# Processes and ports
# --------------------------------------------------------------------------------------------

# Popen objects of brokers started by this interpreter: kept so that they are reaped on stop()
# (no zombies, no "subprocess still running" ResourceWarning).
_children: dict[int, subprocess.Popen[bytes]] = {}


def _read_pid(s: LocalBrokerSettings) -> int | None:
    try:
        return int(s.pid_file.read_text().strip())
    except (OSError, ValueError):
        return None


def _is_our_broker(pid: int, s: LocalBrokerSettings) -> bool:
    """True if ``pid`` is alive (not a zombie) and is the kafka.Kafka JVM using this state dir."""
    child = _children.get(pid)
    if child is not None:
        # Started by this interpreter: poll() is authoritative. (/proc/<pid>/cmdline can read as
        # something else for a moment while the java launcher execs.)
        return child.poll() is None
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    if stat.rsplit(")", 1)[-1].split()[0] in ("Z", "X"):
        return False
    return b"kafka.Kafka" in cmdline and str(s.properties_file).encode() in cmdline


def _accepting(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise
    return True


def _port_taken_error(s: LocalBrokerSettings, port: int) -> PortInUseError:
    role = {s.port: "broker", s.sasl_port: "SASL listener", s.ssl_port: "TLS listener",
            s.sasl_ssl_port: "SASL_SSL listener"}.get(port, "controller")
    return PortInUseError(
        f"port {port} on {s.host} (the Kafka {role} port) is already in use by another process, not by "
        f"this project's broker. Stop that process, or choose other ports: `modelevents kafka start "
        f"--port N` or {ENV_PORT}=N (the controller uses N+1, or {ENV_CONTROLLER_PORT}). To use a broker "
        f"that is already running, set {ENV_BOOTSTRAP}=host:port instead.",
        port,
    )


def _log_tail(s: LocalBrokerSettings, lines: int = 40) -> str:
    try:
        with open(s.log_file, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 64 * 1024))
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return "(no server.log)"
    return "\n".join(text.splitlines()[-lines:])


def _run_coro(coro: Any) -> Any:
    """Run a coroutine to completion from sync code, even when the caller is inside an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    box: dict[str, Any] = {}

    def runner() -> None:
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as exc:
            box["error"] = exc

    t = threading.Thread(target=runner, name="kafka-local-probe", daemon=True)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box.get("value")


async def _probe(bootstrap: str, timeout: float) -> bool:
    """A real client round-trip: bootstrap metadata and DescribeCluster must both answer."""
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(
        bootstrap_servers=bootstrap,
        client_id="modelevents-kafka-local-probe",
        request_timeout_ms=max(1000, int(timeout * 1000)),
    )
    try:
        await asyncio.wait_for(admin.start(), timeout)
        cluster = await asyncio.wait_for(admin.describe_cluster(), timeout)
        return bool(cluster.get("brokers")) and cluster.get("controller_id", -1) >= 0
    except Exception:
        return False
    finally:
        with contextlib.suppress(Exception):
            await admin.close()


def _broker_ready(s: LocalBrokerSettings, timeout: float = 5.0) -> bool:
    if not _accepting(s.host, s.port):
        return False
    return bool(_run_coro(_probe(s.local_bootstrap, timeout)))


def _wait_ready(s: LocalBrokerSettings, pid: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    delay = 0.2
    while True:
        if not _is_our_broker(pid, s):
            child = _children.pop(pid, None)
            code = child.poll() if child is not None else None
            _remove_pid_file(s, pid)
            raise BrokerStartError(
                f"the Kafka broker (pid {pid}) exited during start-up"
                + (f" with status {code}" if code is not None else "")
                + f"; see {s.log_file}",
                _log_tail(s),
            )
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        if _broker_ready(s, timeout=min(5.0, max(1.0, remaining))):
            return
        time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
        delay = min(delay * 1.5, 1.0)
    tail = _log_tail(s)
    _terminate(s, pid)
    raise BrokerStartTimeout(
        f"the Kafka broker did not accept clients on {s.local_bootstrap} within {timeout:.0f} s and was "
        f"stopped. Look at {s.log_file}; on a busy machine retry with a longer timeout (--timeout), or "
        f"delete {s.state_dir} to start from empty storage.",
        tail,
    )


def _remove_pid_file(s: LocalBrokerSettings, pid: int | None = None) -> None:
    if pid is None or _read_pid(s) == pid:
        with contextlib.suppress(FileNotFoundError):
            s.pid_file.unlink()


def _rotate_log(s: LocalBrokerSettings) -> None:
    if s.log_file.exists():
        os.replace(s.log_file, s.log_file.with_name("server.log.1"))


def _launch(s: LocalBrokerSettings, java: str) -> int:
    _rotate_log(s)
    cmd = [java, *_broker_jvm_opts(s), *_jvm_common(s), "kafka.Kafka", str(s.properties_file)]
    with open(s.log_file, "ab") as log:
        log.write(f"# modelevents kafka_local: {' '.join(cmd)}\n".encode())
        log.flush()
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # detached: survives the CLI, not hit by its Ctrl-C
            close_fds=True,
            cwd=s.state_dir,
        )
    _children[proc.pid] = proc
    _atomic_write(s.pid_file, f"{proc.pid}\n")
    return proc.pid


def _terminate(s: LocalBrokerSettings, pid: int, timeout: float | None = None) -> None:
    timeout = s.stop_timeout if timeout is None else timeout
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while _is_our_broker(pid, s) and time.monotonic() < deadline:
        time.sleep(0.1)
    if _is_our_broker(pid, s):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while _is_our_broker(pid, s) and time.monotonic() < deadline:
            time.sleep(0.05)
    child = _children.pop(pid, None)
    if child is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=5)
    _remove_pid_file(s, pid)


# --------------------------------------------------------------------------------------------
# Public operations
# --------------------------------------------------------------------------------------------


def start(
    settings: LocalBrokerSettings | None = None,
    progress: Progress | None = None,
    *,
    timeout: float | None = None,
    fresh: bool = False,
) -> StartResult:
    """Start the local broker unless one is already usable, and wait until it accepts clients.

    * ``$KAFKA_BOOTSTRAP_SERVERS`` set: start nothing, return that address (``external=True``).
    * This project's broker already running on the port: return at once (``started=False``).
    * The port taken by anything else: :class:`PortInUseError`.
    * Otherwise: fetch jars if needed, format ``data/`` if it is not formatted yet (``fresh=True``
      wipes it first: empty topics), write the config, launch the JVM detached and wait up to
      ``timeout`` (default ``settings.start_timeout``) for a real admin/metadata round-trip.
    """
    settings = settings or LocalBrokerSettings()
    progress = progress or _noop
    timeout = settings.start_timeout if timeout is None else timeout
    t0 = time.monotonic()
    external = _external()
    if external:
        progress(f"{ENV_BOOTSTRAP}={external} is set: using that broker, starting none")
        return StartResult(external, started=False, pid=None, external=True, seconds=0.0)

    settings.state_dir.mkdir(parents=True, exist_ok=True)
    with _file_lock(settings.state_dir / ".lock"):
        pid = _read_pid(settings)
        if pid is not None and _is_our_broker(pid, settings):
            if fresh:
                progress(f"stopping the running broker (pid {pid}) to start fresh ...")
                _terminate(settings, pid)
            else:
                if not _accepting(settings.host, settings.port):  # still starting (or stuck)
                    progress(f"broker pid {pid} is starting; waiting ...")
                _wait_ready(settings, pid, timeout)
                return StartResult(settings.local_bootstrap, False, pid, False, time.monotonic() - t0)
        if pid is not None:
            _remove_pid_file(settings, pid)  # stale

        for port in (settings.port, settings.controller_port, *settings._listener_ports):
            if port is not None and not _port_free(settings.host, port):
                raise _port_taken_error(settings, port)

        ensure_jars(settings, progress)
        java = _java()
        _check_java_version(java)
        if fresh and settings.data_dir.exists():
            shutil.rmtree(settings.data_dir)
        _write_config(settings)
        if not (settings.data_dir / "meta.properties").is_file():
            progress("formatting storage ...")
            _format_storage(settings, java)
        progress(f"starting Kafka {settings.version} broker on {settings.local_bootstrap} (heap {settings.heap}) ...")
        pid = _launch(settings, java)
        _wait_ready(settings, pid, timeout)
        seconds = time.monotonic() - t0
        progress(f"broker ready at {settings.local_bootstrap} ({seconds:.1f} s)")
        return StartResult(settings.local_bootstrap, True, pid, False, seconds)


def stop(settings: LocalBrokerSettings | None = None, progress: Progress | None = None, *, timeout: float | None = None) -> bool:
    """Stop this project's broker on ``settings.port``: SIGTERM (controlled shutdown), then SIGKILL
    after ``timeout`` s (default ``settings.stop_timeout``). Returns False if none was running.
    An external ``$KAFKA_BOOTSTRAP_SERVERS`` broker is never touched."""
    settings = settings or LocalBrokerSettings()
    progress = progress or _noop
    pid = _read_pid(settings)
    if pid is None or not _is_our_broker(pid, settings):
        if pid is not None:
            _children.pop(pid, None)
            _remove_pid_file(settings, pid)
        return False
    progress(f"stopping broker pid {pid} on {settings.local_bootstrap} ...")
    t0 = time.monotonic()
    _terminate(settings, pid, timeout)
    progress(f"broker stopped ({time.monotonic() - t0:.1f} s)")
    return True


def status(settings: LocalBrokerSettings | None = None) -> KafkaStatus:
    """Whether this project's broker runs on ``settings.port``, and where its files are."""
    settings = settings or LocalBrokerSettings()
    pid = _read_pid(settings)
    alive = pid is not None and _is_our_broker(pid, settings)
    if alive:
        state = "running" if _accepting(settings.host, settings.port) else "starting"
    else:
        state, pid = "stopped", None
    return KafkaStatus(
        state=state,
        pid=pid,
        port=settings.port,
        bootstrap_servers=bootstrap_servers(settings),
        external=_external() is not None,
        version=settings.version,
        data_dir=settings.data_dir,
        log_file=settings.log_file,
    )


def replace(settings: LocalBrokerSettings, **changes: Any) -> LocalBrokerSettings:
    """``dataclasses.replace`` that recomputes the default controller port when ``port`` changes."""
    if "port" in changes and "controller_port" not in changes and settings.controller_port == settings.port + 1:
        changes["controller_port"] = None
    return dataclasses.replace(settings, **changes)
