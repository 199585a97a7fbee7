"""A readable digest of one run's events: what `modelevents normalize --summary` prints.

Everything an application flattening to one `text` field would lose is listed on its own line:
tool calls, hosted tools, citations, refusals, errors, the terminal state and its reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from modelevents.schemas.events import (
    Citation,
    Error,
    Hosted,
    ModelEvent,
    Reasoning,
    Refusal,
    Text,
    ToolCall,
    Unknown,
    Usage,
)
from modelevents.schemas.run_state import RunState
from modelevents.services.run_logic.run_machine import run_state_of


@dataclass
class Digest:
    state: RunState
    text: str = ""
    reasoning_chars: int = 0
    tool_calls: list[str] = field(default_factory=list)
    hosted: list[str] = field(default_factory=list)
    citations: list[str] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)


def digest(events: list[ModelEvent]) -> Digest:
    result = Digest(state=run_state_of(events))
    # text.done carries the whole part; fall back to deltas for parts that never got a done.
    done_parts: dict[tuple[int, int, str | None], str] = {}
    delta_parts: dict[tuple[int, int, str | None], list[str]] = {}
    call = 0
    for event in events:
        kind, p = event.kind, event.payload
        result.counts[kind] = result.counts.get(kind, 0) + 1
        if kind == "run.started":
            call += 1
        # Each kind carries its KIND_PAYLOAD record (the codec refuses any other); the isinstance
        # checks narrow the payload for the type checker, affordable here: a summary is no hot path.
        if kind in ("text.delta", "text.done") and isinstance(p, Text):
            key = (call, p.output_index, f"{p.item_id}:{p.part_index}")
            if kind == "text.done":
                done_parts[key] = p.text
            else:
                delta_parts.setdefault(key, []).append(p.text)
        elif kind == "reasoning.done" and isinstance(p, Reasoning):
            result.reasoning_chars += len(p.text)
        elif kind == "tool.call" and isinstance(p, ToolCall):
            valid = "" if p.arguments_valid else "  (arguments are NOT valid JSON)"
            result.tool_calls.append(f"{p.tool_name} [{p.tool_call_id}] {p.arguments}{valid}")
        elif kind == "hosted.call" and isinstance(p, Hosted):
            result.hosted.append(f"{p.tool_type} call [{p.call_id}] by {p.authority}"
                                 + (f" {p.name}" if p.name else "")
                                 + (f" {p.arguments}" if p.arguments else ""))
        elif kind == "hosted.result" and isinstance(p, Hosted):
            result.hosted.append(f"{p.tool_type} result [{p.call_id}] status={p.status}"
                                 + (" ERROR" if p.is_error else ""))
        elif kind == "citation" and isinstance(p, Citation):
            result.citations.append(" ".join(
                str(x) for x in (p.source_type, p.url or p.file_id or "", p.title or "",
                                 f"[{p.start}:{p.end}]" if p.start is not None else "") if x))
        elif kind == "refusal" and isinstance(p, Refusal):
            result.refusals.append(p.text or p.category or "(refused)")
        elif kind == "error" and isinstance(p, Error):
            result.errors.append(f"{p.error_type}: {p.message}")
        elif kind == "unknown" and isinstance(p, Unknown):
            result.unknown.append(p.provider_type)
    keys = list(dict.fromkeys([*done_parts, *delta_parts]))
    keys.sort(key=lambda k: (k[0], k[1]))
    result.text = "".join(done_parts.get(k, "".join(delta_parts.get(k, []))) for k in keys)
    return result


def _usage_line(usage: Usage | None) -> str:
    if usage is None:
        return "none reported"
    parts = [f"{name}={value}" for name, value in (
        ("input", usage.input_tokens), ("output", usage.output_tokens),
        ("cache_read", usage.cache_read_tokens), ("cache_write", usage.cache_write_tokens),
        ("reasoning", usage.reasoning_tokens), ("total", usage.total_tokens)) if value is not None]
    parts += [f"{name}={count}" for name, count in usage.server_tool_units.items()]
    return " ".join(parts) or "none reported"


def render(d: Digest) -> str:
    st = d.state
    status = st.status + (f" ({st.reason}" + (f", raw {st.raw_reason}" if st.raw_reason
                                                 and st.raw_reason != st.reason else "") + ")"
                          if st.reason else "")
    lines = [
        f"run       {st.run_id}  {st.provider or '?'}/{st.api or '?'}  model {st.model or '?'}",
        f"status    {status}" + ("  NEEDS RECONCILIATION" if st.needs_reconciliation else ""),
    ]
    lines += [f"          note: {note}" for note in st.reconciliation_notes]
    lines.append(f"usage     {_usage_line(st.usage)}")
    lines.append("events    " + ", ".join(f"{k}={v}" for k, v in sorted(d.counts.items())))
    if d.reasoning_chars:
        lines.append(f"reasoning {d.reasoning_chars} chars")
    for label, items in (("tool call", d.tool_calls), ("hosted", d.hosted),
                         ("citation", d.citations), ("refusal", d.refusals),
                         ("error", d.errors), ("unknown", d.unknown)):
        lines += [f"{label:<9} {item}" for item in items]
    lines.append("text")
    lines += ["  " + line for line in (d.text or "(none)").splitlines() or [""]]
    return "\n".join(lines)
