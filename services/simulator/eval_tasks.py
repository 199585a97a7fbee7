"""Which eval task a request is, so a corpus-aware simulator (``modelevents simulator --corpus``)
answers it with the scenario the task names for the request's API, whatever model it names.

The rule: a conversation's key is the SHA-256 of its user text — the text parts of its user
messages, in order, every whitespace character removed (so joining parts, trimming or
re-wrapping text does not change it). The instructions, tool results, images and files are not
part of it. It is read from the provider body as each API spells user text:

    openai-responses     ``input``: a string, or items of role user (content a string or
                         ``input_text`` parts)
    openai-chat          ``messages`` of role user (content a string or ``text`` parts)
    anthropic-messages   ``messages`` of role user (content a string or ``text`` blocks)
    gemini-generate      ``contents`` of role user (or none): parts with ``text``
    gemini-interactions  ``input``: a string, content parts, ``user_input`` steps or user turns

A task's keys are read the same way from the body each API's request renderer
(adapters/requests) makes of the task's transcript, and from the transcript itself, so what a
renderer does to the text is on both sides. Two tasks with the same user text are refused when
the corpus is loaded: the simulator could not tell them apart.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from modelevents.adapters.errors import RenderError
from modelevents.adapters.requests import render
from modelevents.schemas.errors import ConfigError
from modelevents.schemas.transcript import APIS, NeutralRequest, Target, TextPart
from modelevents.services.migration.eval.corpus import Corpus, Task, load_corpus

_TEXT_TYPES = {"text", "input_text"}


def _texts(content: Any) -> Iterator[str]:
    """The text parts of one message's content (a string, or a list of parts)."""
    if isinstance(content, str):
        yield content
        return
    for part in content if isinstance(content, list) else ():
        if isinstance(part, str):
            yield part
        elif isinstance(part, dict) and isinstance(part.get("text"), str) and (
                part.get("type") in _TEXT_TYPES or "type" not in part):
            yield part["text"]


def _user_contents(api: str, body: dict[str, Any]) -> Iterator[Any]:
    """The content of every user message of ``body``, in order."""
    if api == "openai-chat" or api == "anthropic-messages":
        for message in body.get("messages") or ():
            if isinstance(message, dict) and message.get("role") == "user":
                yield message.get("content")
    elif api == "gemini-generate":
        for content in body.get("contents") or ():
            if isinstance(content, dict) and content.get("role", "user") == "user":
                yield content.get("parts")
    else:  # the Responses and Interactions APIs: ``input``
        items = body.get("input")
        if isinstance(items, (str, dict)):
            items = [items]
        for item in items or ():
            if isinstance(item, str):
                yield item
            elif isinstance(item, dict) and (item.get("role") == "user"
                                             or item.get("type") == "user_input"):
                yield item.get("content")
            elif isinstance(item, dict) and item.get("type") in _TEXT_TYPES:
                yield [item]  # Interactions: the input is itself a list of content parts


def conversation_key(api: str, body: Any) -> str | None:
    """The key of a provider request body's conversation (module docstring); None when it has
    no user text."""
    if not isinstance(body, dict):
        return None
    text = "".join("".join(t.split()) for content in _user_contents(api, body)
                   for t in _texts(content))
    return hashlib.sha256(text.encode()).hexdigest() if text else None


def task_keys(task: Task, api: str) -> set[str]:
    """The keys a request of ``task`` on ``api`` can have."""
    neutral = "".join("".join(p.text.split()) for m in task.transcript if m.role == "user"
                      for p in m.parts if isinstance(p, TextPart))
    keys = {hashlib.sha256(neutral.encode()).hexdigest()} if neutral else set()
    try:
        request = NeutralRequest(transcript=task.transcript, tools=task.tools,
                                 target=Target(provider="any", model="eval-task", api=api))
        body = render(api, request, "eval-task", stream=False)
    except RenderError:
        return keys  # the API cannot carry the task; the transcript's own key stands
    rendered = conversation_key(api, body)
    return keys | ({rendered} if rendered else set())


@dataclass
class TaskIndex:
    """A corpus's tasks by (API, conversation key)."""

    corpus: Corpus
    tasks: dict[tuple[str, str], Task] = field(default_factory=dict)

    @classmethod
    def load(cls, spec: str | Path) -> TaskIndex:
        """The index of the corpus at ``spec`` (a directory, or ``example``)."""
        index = cls(load_corpus(spec))
        clashes: set[str] = set()
        for task in index.corpus.tasks:
            for api in APIS:
                for key in task_keys(task, api):
                    other = index.tasks.setdefault((api, key), task)
                    if other.id != task.id:
                        clashes.add(f"{other.id} and {task.id}")
        if clashes:
            raise ConfigError(f"corpus {index.corpus.ref}: tasks with the same user text, which "
                              f"the simulator cannot tell apart: {', '.join(sorted(clashes))}; "
                              "make their user text differ")
        return index

    @property
    def recordings(self) -> Path | None:
        """The corpus's own recordings (``DIR/recordings``), when it has them."""
        folder = self.corpus.path / "recordings"
        return folder if folder.is_dir() else None

    def scenario_names(self) -> set[str]:
        return {name for task in self.corpus.tasks for name in task.simulator.values()}

    def match(self, api: str, body: Any) -> Task | None:
        key = conversation_key(api, body)
        return self.tasks.get((api, key)) if key else None
