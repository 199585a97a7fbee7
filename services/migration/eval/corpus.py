"""The eval corpus: a versioned directory of tasks, and its loader.

    DIR/corpus.yaml          name, version, description; optional ``tasks:`` (ids, in order)
    DIR/tasks/<id>.yaml      one task: class, transcript (neutral messages, multimodal parts
                             allowed), tools, structured_output, expect, data_policy, simulator
    DIR/recordings/<api>/    hand-written provider streams the tasks' simulator scenarios name
                             (``modelevents simulator --corpus DIR`` serves them and answers
                             each task with its scenario: services/simulator/eval_tasks.py)

``--corpus example`` is the corpus shipped in this package (``example/``). A task's ``expect``
names its checker (checkers.py) and what the gates need to know: ``citations: true`` (an
answer without citations or hosted-tool evidence is missing evidence), ``tool_arguments``
checked against each granted tool's JSON Schema. ``data_policy`` says which providers may see
the task's input and which patterns the output must not carry. Every problem is reported at
once, each naming the file and the field.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from modelevents.schemas.errors import ConfigError
from modelevents.schemas.transcript import APIS, Message, StructuredOutput, ToolDeclaration

EXAMPLE_CORPUS = Path(__file__).resolve().parent / "example"
TASK_CLASSES = ("simple_generation", "schema_extraction", "multimodal_input", "one_tool",
                "multi_tool", "refusal", "long_context", "interrupted_stream",
                "uncertain_side_effect")
CHECKERS = ("text_contains", "json_fields", "tool_calls", "refusal", "terminal_status",
            "tool_outcomes")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Expectation(_Strict):
    """What counts as done (``checker`` and its arguments) and what the gates require."""

    checker: Literal["text_contains", "json_fields", "tool_calls", "refusal", "terminal_status",
                     "tool_outcomes"]
    text: list[str] = Field(default_factory=list)  # text_contains: every one, case-insensitive
    fields: dict[str, Any] = Field(default_factory=dict)  # json_fields: top-level values
    tools: list[str] = Field(default_factory=list)  # tool_calls: these names, any order
    status: str | None = None  # terminal_status: completed | incomplete | failed | cancelled
    outcomes: list[str] = Field(default_factory=list)  # tool_outcomes: receipts' outcomes
    citations: bool = False  # the answer must cite sources or carry hosted-tool evidence
    approvals_expected: int = 0  # approvals a reviewer is expected to give (reviewer effort)


class ForbiddenPattern(_Strict):
    name: str
    regex: str

    @field_validator("regex")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a regular expression: {exc}") from None
        return value


class DataPolicy(_Strict):
    """Providers that may receive the task's input (empty: any), and what output must not say."""

    providers: list[str] = Field(default_factory=list)
    forbid_output: list[ForbiddenPattern] = Field(default_factory=list)


class Task(_Strict):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_\-]{0,63}$")
    task_class: str = Field(alias="class")
    description: str = ""
    transcript: list[Message] = Field(min_length=1)
    tools: list[ToolDeclaration] = Field(default_factory=list)
    structured_output: StructuredOutput | None = None
    background: bool = False
    expect: Expectation
    data_policy: DataPolicy = Field(default_factory=DataPolicy)
    simulator: dict[str, str] = Field(default_factory=dict)  # api -> simulator scenario

    @field_validator("task_class")
    @classmethod
    def _known_class(cls, value: str) -> str:
        if value not in TASK_CLASSES:
            raise ValueError(f"unknown task class {value!r}; known: {', '.join(TASK_CLASSES)}")
        return value

    @field_validator("simulator")
    @classmethod
    def _known_apis(cls, value: dict[str, str]) -> dict[str, str]:
        unknown = sorted(set(value) - set(APIS))
        if unknown:
            raise ValueError(f"unknown API {unknown}; known: {', '.join(APIS)}")
        return value

    def scenario(self, api: str) -> str:
        """The simulator scenario this task is served with on ``api``."""
        if api not in self.simulator:
            raise ConfigError(f"task {self.id} names no simulator scenario for {api} (it has "
                              f"{', '.join(sorted(self.simulator)) or 'none'}); add one under "
                              "simulator: in its file")
        return self.simulator[api]


class CorpusHeader(_Strict):
    name: str = Field(min_length=1, max_length=128)
    version: str = Field(min_length=1, max_length=64)
    description: str = ""
    tasks: list[str] | None = None


@dataclass(frozen=True)
class Corpus:
    name: str
    version: str
    path: Path
    tasks: list[Task] = field(default_factory=list)
    description: str = ""

    @property
    def ref(self) -> str:
        """``name@version``: what a result names."""
        return f"{self.name}@{self.version}"

    def task(self, task_id: str) -> Task:
        for task in self.tasks:
            if task.id == task_id:
                return task
        raise ConfigError(f"corpus {self.ref} has no task {task_id!r}")

    def classes(self) -> set[str]:
        return {t.task_class for t in self.tasks}


def resolve(spec: str | Path) -> Path:
    """``example`` → the shipped corpus; anything else a directory path."""
    return EXAMPLE_CORPUS if str(spec) == "example" else Path(spec)


def _problems(exc: ValidationError, where: str) -> list[str]:
    return [f"{where}: {'.'.join(str(p) for p in err['loc']) or '(top)'}: {err['msg']}"
            for err in exc.errors()]


def _yaml(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML: {exc}") from exc


def _include_texts(task_doc: dict[str, Any], path: Path, problems: list[str]) -> None:
    """A text part ``{type: text, include: FILE}`` takes the text of FILE (beside the task)."""
    for message in task_doc.get("transcript") or ():
        for part in (message.get("parts") or ()) if isinstance(message, dict) else ():
            if isinstance(part, dict) and "include" in part:
                included = path.parent / str(part.pop("include"))
                try:
                    part["text"] = included.read_text()
                except OSError as exc:
                    problems.append(f"{path}: include {included.name}: {exc.strerror}")
                    part["text"] = ""


def load_corpus(spec: str | Path) -> Corpus:
    """The corpus at ``spec``; ConfigError listing every problem of every file."""
    root = resolve(spec)
    header_path = root / "corpus.yaml"
    if not header_path.is_file():
        raise ConfigError(f"{root} is not an eval corpus: it has no corpus.yaml (name, version); "
                          "pass --corpus example for the shipped one")
    problems: list[str] = []
    doc = _yaml(header_path)
    try:
        header = CorpusHeader.model_validate(doc if isinstance(doc, dict) else {})
    except ValidationError as exc:
        raise ConfigError("\n".join(_problems(exc, str(header_path)))) from None
    files = sorted((root / "tasks").glob("*.yaml"))
    by_id: dict[str, Task] = {}
    for path in files:
        task_doc = _yaml(path)
        if not isinstance(task_doc, dict):
            problems.append(f"{path}: a task file is a mapping (id, class, transcript, expect)")
            continue
        try:
            _include_texts(task_doc, path, problems)
            task = Task.model_validate(task_doc)
        except ValidationError as exc:
            problems.extend(_problems(exc, str(path)))
            continue
        if task.id != path.stem:
            problems.append(f"{path}: id {task.id!r} differs from the file name {path.stem!r}")
        elif task.id in by_id:
            problems.append(f"{path}: task id {task.id!r} is used twice")
        by_id[task.id] = task
    order = header.tasks if header.tasks is not None else sorted(by_id)
    missing = [t for t in order if t not in by_id]
    if missing:
        problems.append(f"{header_path}: tasks lists {missing}, which have no file under tasks/")
    if not files:
        problems.append(f"{root / 'tasks'}: no task files (tasks/<id>.yaml)")
    if problems:
        raise ConfigError(f"corpus {root} has {len(problems)} problem(s):\n  "
                          + "\n  ".join(problems))
    return Corpus(header.name, header.version, root, [by_id[t] for t in order],
                  header.description)
