# The modelevents service image: the CLI, the worker and the gateway.
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY schemas schemas
COPY adapters adapters
COPY services services
COPY consumers consumers
RUN pip install --no-cache-dir .
USER nobody
ENTRYPOINT ["modelevents"]
CMD ["--help"]
