"""The price table: what a run cost, per model snapshot, plus its tools' costs from receipts.

A YAML (or JSON) file, USD per million tokens for each model snapshot the events report::

    currency: USD
    models:
      gpt-5-mini-2025-08-07: {input: 0.25, output: 2.0, cache_read: 0.025}
      claude-sonnet-4-5-20250929: {input: 3.0, output: 15.0, cache_read: 0.3, cache_write: 3.75}

Cached input tokens are priced as ``cache_read`` (and taken out of ``input``); a snapshot the
table does not name has no cost (None), and the comparison says which snapshots were unpriced
rather than counting them as free. The example corpus ships ``prices.example.yaml``: example
figures, not anyone's current prices.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from modelevents.schemas.errors import ConfigError
from modelevents.schemas.events import Usage

MILLION = 1_000_000


class Price(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_read: float | None = Field(default=None, ge=0)
    cache_write: float | None = Field(default=None, ge=0)


class PriceTable(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    currency: str = "USD"
    models: dict[str, Price] = Field(default_factory=dict)

    def token_cost(self, snapshot: str | None, usage: Usage | None) -> float | None:
        price = self.models.get(snapshot or "")
        if price is None or usage is None:
            return None
        cached = usage.cache_read_tokens or 0
        written = usage.cache_write_tokens or 0
        fresh = max((usage.input_tokens or 0) - cached, 0)
        read_price = price.cache_read if price.cache_read is not None else price.input
        write_price = price.cache_write if price.cache_write is not None else price.input
        return (fresh * price.input + cached * read_price + written * write_price
                + (usage.output_tokens or 0) * price.output) / MILLION


def load_prices(path: str | Path | None) -> PriceTable:
    if path is None:
        return PriceTable()
    try:
        doc = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise ConfigError(f"cannot read the price table {path}: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"the price table {path} is not valid YAML: {exc}") from exc
    try:
        return PriceTable.model_validate(doc or {})
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise ConfigError(f"the price table {path}: {problems}") from None
