# The modelevents service image: the CLI, the worker and the gateway.
#
#   docker build -t modelevents .
#   docker run --rm modelevents --help
#   docker run -d -e KAFKA_BOOTSTRAP_SERVERS=kafka:9092 -v me-state:/var/lib/modelevents \
#       modelevents worker --health-port 8081
#
# The base is pinned by tag and by the digest of its multi-architecture index (update both
# together). It runs as the numeric user 10001 (group 10001), so that Kubernetes can check
# runAsNonRoot; the worker's state directory (MODELEVENTS_STATE_DIR) is /var/lib/modelevents,
# owned by that user and declared a volume; the root filesystem can be read-only (the chart
# mounts emptyDirs on the state directory and /tmp).
FROM python:3.11.14-slim-bookworm@sha256:65a93d69fa75478d554f4ad27c85c1e69fa184956261b4301ebaf6dbb0a3543d

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore \
    MODELEVENTS_STATE_DIR=/var/lib/modelevents

ARG UID=10001
ARG GID=10001
RUN groupadd --system --gid "$GID" modelevents \
    && useradd --system --uid "$UID" --gid "$GID" --home-dir /var/lib/modelevents \
       --no-create-home --shell /usr/sbin/nologin modelevents \
    && install -d -o "$UID" -g "$GID" -m 0750 /var/lib/modelevents

WORKDIR /app

# The dependencies in a layer of their own: it is rebuilt only when pyproject.toml changes, not
# for every change of the source.
COPY pyproject.toml ./
# The core and the extras the image's commands need: worker, gateway, tools, audit, otel.
RUN python -c "import tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; print('\n'.join(dict.fromkeys(p['dependencies'] + [d for e in ('gateway', 'worker', 'tools', 'audit', 'otel') for d in p['optional-dependencies'][e]])))" \
        > /tmp/requirements.txt \
    && pip install -r /tmp/requirements.txt \
    && rm /tmp/requirements.txt

COPY README.md ./
COPY schemas schemas
COPY adapters adapters
COPY services services
COPY consumers consumers
RUN pip install --no-deps . \
    && rm -rf /app/build /app/*.egg-info \
    && modelevents --help >/dev/null

USER 10001:10001
WORKDIR /var/lib/modelevents
VOLUME ["/var/lib/modelevents"]

# MODELEVENTS_HEALTHCHECK_PORT names the port whose /healthz the check asks: the worker's
# --health-port, or the gateway's --port (docker-compose.yml sets it per service; Kubernetes
# ignores HEALTHCHECK and uses the chart's probes). Unset, the check passes while the process runs.
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-m", "modelevents.services.processor.health"]

EXPOSE 8080 8081
ENTRYPOINT ["modelevents"]
CMD ["--help"]
