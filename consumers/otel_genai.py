"""Finished runs as OpenTelemetry traces, named by the GenAI semantic conventions.

``modelevents otel export`` (services/cli/commands/otel.py) follows the ``events`` topic through the
public consumer API, folds each run's events here (:class:`RunFolder`) and, when the run
finishes (its ``run.finished`` event), sends its spans over OTLP/HTTP (:class:`SpanExporter`).

One trace per run::

    modelevents.run                       INTERNAL  the run, from its first event to its last
      chat {model}                        CLIENT    one per provider call (run.started … the
                                                    call's run.awaiting or run.finished)
        execute_tool {tool}               INTERNAL  one per tool call the model asked for (a
                                                    function: tool.call … its tool.result) or
                                                    a hosted tool the provider ran

Attribute names are those of the GenAI conventions (``gen_ai.*``, development status; the
names of their registry as of 2026, ``gen_ai.provider.name`` rather than the deprecated
``gen_ai.system``); what they do not name is under ``modelevents.*``. Timestamps are the
events' ``received_at``. Token counts are the run's ``usage`` events' (the last snapshot
of each call), which already mean what the conventions ask: ``gen_ai.usage.input_tokens``
includes the cached tokens (the Anthropic adapter adds the cache reads and writes its provider
reports apart), and the cache reads and writes are ``gen_ai.usage.cache_read.input_tokens`` /
``gen_ai.usage.cache_creation.input_tokens``. Prompt and completion content is never exported.

The OpenTelemetry SDK and OTLP exporter are the ``otel`` extra (``pip install
'modelevents[otel]'``), imported only when spans are exported.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from modelevents.schemas.errors import ConfigError, ModelEventsError
from modelevents.schemas.events import (
    Error,
    Hosted,
    ModelEvent,
    RunAwaiting,
    RunFinished,
    RunStarted,
    ToolCall,
    ToolResult,
    Usage,
)
from modelevents.services.errors import MissingExtra
from modelevents.services.logs import event_fields

log = logging.getLogger(__name__)

EXTRA = "otel"
# Our provider names → the conventions' well-known gen_ai.provider.name values.
PROVIDER_NAMES = {"openai": "openai", "anthropic": "anthropic", "google": "gcp.gemini"}
# The kinds the exporter reads (the subscription's filter): no text, no deltas.
KINDS = frozenset({"run.started", "run.awaiting", "run.finished", "usage", "error", "tool.call",
                   "tool.result", "hosted.call", "hosted.result"})
DEFAULT_MAX_OPEN = 100_000
SERVICE_NAME = "modelevents"


# --- a run, folded ------------------------------------------------------------------------------


@dataclass
class ToolUse:
    name: str
    call_id: str
    tool_type: str  # function | extension (a hosted tool the provider ran)
    start_ms: int
    end_ms: int | None = None
    is_error: bool = False


@dataclass
class CallTrace:
    """One provider call of a run."""

    start_ms: int
    end_ms: int
    model: str | None = None
    response_id: str | None = None
    raw_reason: str | None = None
    reason: str | None = None  # the normalized finish or awaiting reason
    usage: Usage | None = None
    error: Error | None = None
    tools: list[ToolUse] = field(default_factory=list)


@dataclass
class RunTrace:
    run_id: str
    tenant: str
    provider: str
    api: str
    start_ms: int
    end_ms: int
    status: str | None = None  # the terminal status (run.finished)
    calls: list[CallTrace] = field(default_factory=list)
    # The run's first events were not seen (the subscription started inside the run).
    partial: bool = False
    _tools: dict[str, ToolUse] = field(default_factory=dict, repr=False)
    _open: bool = field(default=False, repr=False)  # the last call has not ended yet

    def feed(self, event: ModelEvent) -> bool:
        """Take one event; True when it finished the run."""
        at = event.received_at
        self.end_ms = max(self.end_ms, at)
        payload: Any = event.payload
        if isinstance(payload, RunStarted) or not self.calls:
            self.calls.append(CallTrace(start_ms=at, end_ms=at))
            self._open = True
        call = self.calls[-1]
        if self._open:  # between two calls (tool results) an event does not lengthen the last
            call.end_ms = max(call.end_ms, at)
            call.model = event.model or call.model
        if isinstance(payload, RunStarted):
            call.response_id = payload.provider_object_id
        elif isinstance(payload, Usage):
            call.usage = payload  # an absolute snapshot for the step: the last one holds
        elif isinstance(payload, Error):
            call.error = payload
        elif isinstance(payload, ToolCall):
            self._tool(call, ToolUse(payload.tool_name, payload.tool_call_id, "function", at))
        elif isinstance(payload, ToolResult):
            use = self._tools.get(payload.tool_call_id)
            if use is not None:
                use.end_ms, use.is_error = at, payload.is_error
        elif isinstance(payload, Hosted):
            if event.kind == "hosted.call":
                self._tool(call, ToolUse(payload.name or payload.tool_type, payload.call_id,
                                         "extension", at, is_error=payload.is_error))
            elif (use := self._tools.get(payload.call_id)) is not None:
                use.end_ms, use.is_error = at, use.is_error or payload.is_error
        elif isinstance(payload, (RunAwaiting, RunFinished)):
            call.reason, call.raw_reason = payload.reason, payload.raw_reason
            self._open = False
            if isinstance(payload, RunFinished):
                self.status = payload.status
                return True
        return False

    def _tool(self, call: CallTrace, use: ToolUse) -> None:
        if use.call_id not in self._tools:
            self._tools[use.call_id] = use
            call.tools.append(use)


class RunFolder:
    """Folds the events of many runs (each run's in seq order, as the consumer API yields them)
    and hands back each run when it finishes. Open runs are held in memory, at most
    ``max_open`` (the least recently active one beyond that is dropped, with a warning)."""

    def __init__(self, max_open: int = DEFAULT_MAX_OPEN) -> None:
        self.max_open = max_open
        self._runs: OrderedDict[str, RunTrace] = OrderedDict()
        self.dropped = 0

    def feed(self, event: ModelEvent) -> RunTrace | None:
        run = self._runs.get(event.run_id)
        if run is None:
            run = RunTrace(event.run_id, event.tenant, event.provider, event.api,
                           start_ms=event.received_at, end_ms=event.received_at,
                           partial=event.seq > 0)
            self._runs[event.run_id] = run
            if len(self._runs) > self.max_open:
                _, old = self._runs.popitem(last=False)
                self.dropped += 1
                log.warning("run %s not finished after %d other runs began; not exported",
                            old.run_id, self.max_open, extra=event_fields(old))
        else:
            self._runs.move_to_end(event.run_id)
        if run.feed(event):
            del self._runs[event.run_id]
            return run
        return None

    @property
    def open_runs(self) -> int:
        return len(self._runs)


# --- attributes ----------------------------------------------------------------------------------


def provider_name(provider: str) -> str:
    """The conventions' gen_ai.provider.name for one of our provider names."""
    return PROVIDER_NAMES.get(provider, provider)


def usage_attributes(usage: Usage | None) -> dict[str, int]:
    if usage is None:
        return {}
    out: dict[str, int] = {}
    cache_read, cache_write = usage.cache_read_tokens, usage.cache_write_tokens
    if usage.input_tokens is not None:
        out["gen_ai.usage.input_tokens"] = usage.input_tokens
    if usage.output_tokens is not None:
        out["gen_ai.usage.output_tokens"] = usage.output_tokens
    if cache_read is not None:
        out["gen_ai.usage.cache_read.input_tokens"] = cache_read
    if cache_write is not None:
        out["gen_ai.usage.cache_creation.input_tokens"] = cache_write
    if usage.reasoning_tokens is not None:
        out["modelevents.usage.reasoning_tokens"] = usage.reasoning_tokens
    return out


def _common(run: RunTrace) -> dict[str, Any]:
    return {"gen_ai.provider.name": provider_name(run.provider), "modelevents.run_id": run.run_id,
            "modelevents.tenant": run.tenant, "modelevents.api": run.api}


def call_attributes(run: RunTrace, call: CallTrace) -> dict[str, Any]:
    out: dict[str, Any] = {"gen_ai.operation.name": "chat", **_common(run)}
    if call.model:
        # The events carry the model the provider answered with; the request named it too.
        out["gen_ai.request.model"] = out["gen_ai.response.model"] = call.model
    if call.response_id:
        out["gen_ai.response.id"] = call.response_id
    if call.raw_reason or call.reason:
        out["gen_ai.response.finish_reasons"] = [call.raw_reason or call.reason]
        out["modelevents.finish_reason"] = call.reason
    out.update(usage_attributes(call.usage))
    if call.error is not None:
        out["error.type"] = call.error.code or call.error.error_type
        out["modelevents.error_type"] = call.error.error_type
    return {k: v for k, v in out.items() if v is not None}


def tool_attributes(run: RunTrace, use: ToolUse) -> dict[str, Any]:
    out: dict[str, Any] = {"gen_ai.operation.name": "execute_tool", **_common(run),
                           "gen_ai.tool.name": use.name, "gen_ai.tool.call.id": use.call_id,
                           "gen_ai.tool.type": use.tool_type}
    if use.is_error:
        out["error.type"] = "tool_error"
    return out


# --- export ------------------------------------------------------------------------------------


def _sdk() -> Any:
    """The OpenTelemetry SDK modules, or a MissingExtra naming the extra to install."""
    try:
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
        from opentelemetry.sdk.trace.export import SpanExportResult
    except ImportError as exc:
        raise MissingExtra("exporting OpenTelemetry spans", EXTRA, exc.name or str(exc)) from None
    return (trace, OTLPSpanExporter, Resource, SpanProcessor, TracerProvider, SpanExportResult)


def traces_endpoint(endpoint: str) -> str:
    """An OTLP/HTTP collector address → its traces URL (``/v1/traces`` added to a bare host)."""
    from urllib.parse import urlsplit

    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"--endpoint {endpoint!r}: an http(s) URL, such as "
                          "http://localhost:4318 or http://collector:4318/v1/traces")
    return endpoint if parts.path not in ("", "/") else endpoint.rstrip("/") + "/v1/traces"


class ExportFailed(ModelEventsError):
    """The collector did not take a run's spans in the time given."""


class SpanExporter:
    """Turns finished runs into spans and sends each run's spans in one OTLP/HTTP request,
    trying again (doubling pauses, up to 10 s) for ``give_up_after`` seconds before raising
    :class:`ExportFailed`."""

    def __init__(self, endpoint: str, *, service_name: str = SERVICE_NAME,
                 headers: dict[str, str] | None = None, timeout: float = 10.0,
                 give_up_after: float = 60.0) -> None:
        trace, otlp, resource, processor_base, provider_cls, result_cls = _sdk()
        self.endpoint = traces_endpoint(endpoint)
        self._trace = trace
        self._ok = result_cls.SUCCESS
        self._exporter = otlp(endpoint=self.endpoint, headers=headers or None, timeout=timeout)
        self.give_up_after = give_up_after
        self._ended: list[Any] = []
        ended = self._ended

        class Collect(processor_base):  # type: ignore[misc, valid-type]
            def on_end(self, span: Any) -> None:
                ended.append(span)

        from modelevents.schemas import __version__

        self._provider = provider_cls(resource=resource.create({"service.name": service_name}))
        self._provider.add_span_processor(Collect())
        self._tracer = self._provider.get_tracer("modelevents.consumers.otel_genai", __version__)
        self.runs = 0
        self.spans = 0

    def export(self, run: RunTrace) -> int:
        """Send ``run``'s spans; the number of spans sent."""
        self._ended.clear()
        self._spans_of(run)
        spans = list(self._ended)
        deadline = time.monotonic() + self.give_up_after
        pause = 0.5
        while self._exporter.export(spans) != self._ok:
            if time.monotonic() + pause > deadline:
                raise ExportFailed(f"the collector at {self.endpoint} did not take the spans of "
                                   f"run {run.run_id} within {self.give_up_after:g} s")
            log.warning("the collector at %s did not take the spans of run %s; trying again in "
                        "%.1f s", self.endpoint, run.run_id, pause, extra=event_fields(run))
            time.sleep(pause)
            pause = min(pause * 2, 10.0)
        self.runs += 1
        self.spans += len(spans)
        return len(spans)

    def _spans_of(self, run: RunTrace) -> None:
        trace, tracer = self._trace, self._tracer
        ns = 1_000_000
        status_error = trace.Status(trace.StatusCode.ERROR)
        root = tracer.start_span("modelevents.run", kind=trace.SpanKind.INTERNAL,
                                 start_time=run.start_ms * ns,
                                 attributes={**_common(run), "modelevents.partial": run.partial,
                                             "modelevents.status": run.status or "unknown",
                                             "modelevents.calls": len(run.calls)})
        if run.status == "failed":
            root.set_status(status_error)
        parent = trace.set_span_in_context(root)
        for call in run.calls:
            span = tracer.start_span(f"chat {call.model}" if call.model else "chat",
                                     context=parent, kind=trace.SpanKind.CLIENT,
                                     start_time=call.start_ms * ns,
                                     attributes=call_attributes(run, call))
            if call.error is not None:
                span.set_status(trace.Status(trace.StatusCode.ERROR, call.error.message))
            inner = trace.set_span_in_context(span)
            for use in call.tools:
                tool = tracer.start_span(f"execute_tool {use.name}", context=inner,
                                         kind=trace.SpanKind.INTERNAL,
                                         start_time=use.start_ms * ns,
                                         attributes=tool_attributes(run, use))
                if use.is_error:
                    tool.set_status(status_error)
                tool.end(end_time=(use.end_ms if use.end_ms is not None else use.start_ms) * ns)
            span.end(end_time=call.end_ms * ns)
        root.end(end_time=run.end_ms * ns)

    def close(self) -> None:
        self._exporter.shutdown()
        self._provider.shutdown()


__all__ = ["RunFolder", "RunTrace", "CallTrace", "ToolUse", "SpanExporter", "ExportFailed",
           "MissingExtra", "KINDS", "provider_name", "usage_attributes", "call_attributes",
           "tool_attributes", "traces_endpoint"]
