"""An export is a standard Avro object container file: the reference implementation reads it.

Apache Avro's Java library (``DataFileReader`` + ``GenericDatumReader``, no project code, no
schema given: it takes the writer schema from the file's header) reads an archive of events and
frames and prints what it found. The jars come from Maven Central with Maven, as the broker's
do, and are cached; the test therefore needs java and mvn like the Kafka tests (hence the
``kafka`` marker: it runs wherever they run).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from modelevents.adapters.registry import normalize_bytes
from modelevents.consumers.replay import archive
from modelevents.schemas import codec
from modelevents.services.local.feeder import frames_for_file
from modelevents.services.settings.xdg import cache_dir
from tests.paths import FIXTURES, SCHEMA_SAMPLES

pytestmark = pytest.mark.kafka

AVRO_VERSION = "1.12.1"

POM = f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.modelevents</groupId><artifactId>avro-reader</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.avro</groupId><artifactId>avro</artifactId><version>{AVRO_VERSION}</version></dependency>
  </dependencies>
  <build><plugins><plugin><groupId>org.apache.maven.plugins</groupId>
    <artifactId>maven-dependency-plugin</artifactId><version>3.8.1</version></plugin></plugins></build>
</project>
"""

READER = """
import java.io.File;
import java.nio.ByteBuffer;
import org.apache.avro.file.DataFileReader;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericRecord;

public class ReadArchive {
  public static void main(String[] args) throws Exception {
    try (DataFileReader<Object> in = new DataFileReader<>(new File(args[0]), new GenericDatumReader<>())) {
      System.out.println("header " + in.getSchema().getType() + " " + in.getMetaString("avro.codec")
          + " " + in.getMetaString("modelevents.contents"));
      for (Object item : in) {
        GenericRecord r = (GenericRecord) item;
        if (r.getSchema().getFullName().equals("modelevents.ModelEvent")) {
          GenericRecord payload = (GenericRecord) r.get("payload");
          System.out.println("event " + r.get("event_id") + " " + r.get("kind") + " " + r.get("seq")
              + " " + payload.getSchema().getName());
        } else {
          System.out.println("frame " + r.get("frame_id") + " " + ((ByteBuffer) r.get("body")).remaining());
        }
      }
    }
  }
}
"""


def avro_jars() -> Path:
    libs = cache_dir("avro") / AVRO_VERSION / "libs"
    if (libs / ".complete").is_file():
        return libs
    mvn, java = shutil.which("mvn"), shutil.which("java")
    assert mvn and java, "java and mvn are needed (as for the Kafka broker): apt-get install maven"
    libs.parent.mkdir(parents=True, exist_ok=True)
    with open(libs.parent / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (libs / ".complete").is_file():
            return libs
        (libs.parent / "pom.xml").write_text(POM)
        tmp = Path(tempfile.mkdtemp(prefix="libs.partial-", dir=libs.parent))
        proc = subprocess.run([mvn, "-B", "-q", "-f", str(libs.parent / "pom.xml"),
                               "dependency:copy-dependencies", f"-DoutputDirectory={tmp}",
                               "-DincludeScope=runtime"], capture_output=True, text=True,
                              timeout=1200)
        assert proc.returncode == 0, (
            f"Maven could not fetch Avro {AVRO_VERSION}:\n{proc.stdout}{proc.stderr}")
        (tmp / ".complete").write_text(AVRO_VERSION)
        shutil.rmtree(libs, ignore_errors=True)
        os.rename(tmp, libs)
    return libs


def test_the_java_reference_implementation_reads_an_export(tmp_path: Path) -> None:
    events, frames = [], []
    for path in (FIXTURES / "anthropic-messages" / "pause-turn-then-continuation.sse",
                 FIXTURES / "gemini-generate" / "inline-image.json",
                 FIXTURES / "cassettes" / "anthropic-tool-loop.yaml"):
        run_id = f"run-{path.stem}"
        events += normalize_bytes(path.read_bytes(), run_id=run_id).events
        frames += frames_for_file(path, run_id=run_id, received_at=1).frames
    out = tmp_path / "export.avro"
    with archive.ArchiveWriter(out, with_frames=True) as writer:
        for obj in [*events, *frames]:
            writer.write_value(codec.encode(obj))
    source = tmp_path / "ReadArchive.java"
    source.write_text(READER)

    proc = subprocess.run([shutil.which("java") or "java", "-cp", f"{avro_jars()}/*", str(source),
                           str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "header UNION deflate events+frames"
    assert lines[1:] == (
        [f"event {e.event_id} {e.kind} {e.seq} {type(e.payload).__name__}" for e in events]
        + [f"frame {f.frame_id} {len(f.body)}" for f in frames])


# --- Kafka values: BinaryMessageDecoder, the single-object decoder of the reference library -----

MESSAGE_READER = """
import java.io.File;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import org.apache.avro.Schema;
import org.apache.avro.SchemaNormalization;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericRecord;
import org.apache.avro.message.BinaryMessageDecoder;

public class ReadMessages {
  // args: schema file, then record files; one line per record.
  public static void main(String[] args) throws Exception {
    Schema schema = new Schema.Parser().parse(new File(args[0]));
    byte[] fp = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN)
        .putLong(SchemaNormalization.parsingFingerprint64(schema)).array();
    StringBuilder hex = new StringBuilder();
    for (byte b : fp) hex.append(String.format("%02x", b));
    System.out.println("schema " + schema.getFullName() + " " + hex);
    BinaryMessageDecoder<GenericRecord> decoder = new BinaryMessageDecoder<>(GenericData.get(), schema);
    for (int i = 1; i < args.length; i++) {
      byte[] value = Files.readAllBytes(new File(args[i]).toPath());
      try {
        GenericRecord r = decoder.decode(value);
        StringBuilder times = new StringBuilder();
        for (String name : new String[] {"received_at", "started_at", "updated_at", "finished_at", "at"}) {
          if (r.getSchema().getField(name) != null) times.append(" ").append(name).append("=").append(r.get(name));
        }
        System.out.println("read " + new File(args[i]).getName() + times);
      } catch (Exception e) {
        System.out.println("refused " + new File(args[i]).getName() + " " + e.getClass().getSimpleName());
      }
    }
  }
}
"""


def test_the_java_reference_implementation_decodes_every_kafka_value(tmp_path: Path) -> None:
    """Issue #11 §4: Java's BinaryMessageDecoder, given a shipped schema file, computes the
    fingerprint itself and decodes every record the codec writes with it — RunState included
    (its fingerprint was 6cad731c9afff2f0 until v2, which Java refused; the v1 sample shows it)."""
    from tests.schemas.sample_records import PAYLOADS, model_event, other_records

    records: dict[str, object] = {f"model_event.{k}": model_event(k, seq=i)
                                  for i, k in enumerate(sorted(PAYLOADS))}
    records.update(other_records())
    files = {"ModelEvent": "model_event.avsc", "ProviderFrame": "provider_frame.avsc",
             "RunState": "run_state.avsc", "DeadLetter": "dead_letter.avsc"}
    source = tmp_path / "ReadMessages.java"
    source.write_text(MESSAGE_READER)
    old_runs = SCHEMA_SAMPLES / "v1" / "run_state.bin"
    for type_name, file_name in files.items():
        chosen = {key: obj for key, obj in records.items() if type(obj).__name__ == type_name}
        paths = []
        for key, obj in chosen.items():
            (tmp_path / f"{key}.bin").write_bytes(codec.encode(obj))
            paths.append(str(tmp_path / f"{key}.bin"))
        if type_name == "RunState":
            paths.append(str(old_runs))
        proc = subprocess.run([shutil.which("java") or "java", "-cp", f"{avro_jars()}/*",
                               str(source), str(codec.AVRO_DIR / file_name), *paths],
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        lines = proc.stdout.splitlines()
        fp = codec.schemas().current_fingerprint[f"modelevents.{type_name}"].hex()
        assert lines[0] == f"schema modelevents.{type_name} {fp}"
        expected = []
        for key, obj in chosen.items():
            times = [(n, getattr(obj, n)) for n in ("received_at", "started_at", "updated_at",
                                                    "finished_at", "at") if hasattr(obj, n)]
            expected.append(f"read {key}.bin" + "".join(
                f" {n}={'null' if v is None else v}" for n, v in times))
        if type_name == "RunState":
            # Written under the old fingerprint: the codec still reads it, Java cannot.
            expected.append("refused run_state.bin MissingSchemaException")
        assert lines[1:] == expected
