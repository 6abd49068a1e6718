"""The example flows validate cleanly (their jobs import) and expand as documented."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from flows.expand.jobs import expand
from flows.validation.validate import validate_file

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
WHEN = datetime(2025, 1, 31, 2, tzinfo=UTC)


@pytest.mark.parametrize(
    "name",
    ["etl", "fanout", "files", "shell", "nightly", "minutely", "approval", "subflow", "report"],
)
def test_example_is_clean(name: str) -> None:
    result = validate_file(EXAMPLES / f"{name}.yaml", check_imports=True, now=WHEN.timestamp())
    assert result.findings == []


def _plan(name: str, **params: Any) -> list[Any]:
    result = validate_file(EXAMPLES / f"{name}.yaml")
    assert result.flow is not None
    return expand(result.flow, run_id="r", logical_time=WHEN, params=params, flow_dir=EXAMPLES)


def test_etl_shape() -> None:
    puts = _plan("etl")
    assert [p.jid for p in puts] == [
        "r:extract_orders",
        "r:extract_customers",
        "r:extract_prices",
        "r:transform",
        "r:load[0]",
        "r:load[1]",
        "r:load[2]",
        "r:notify",
    ]
    notify = puts[-1]
    assert (notify.trigger, notify.depends) == (
        "all_done",
        ("r:load[0]", "r:load[1]", "r:load[2]"),
    )


def test_files_fans_out_from_an_output_in_one_template_job() -> None:
    puts = _plan("files")
    assert [p.jid for p in puts] == ["r:list", "r:count", "r:total"]
    assert puts[1].fanout == ("r:list", "files")
    assert puts[1].concurrency_limit == 4


def test_fanout_has_100_items_and_one_fan_in() -> None:
    puts = _plan("fanout")
    assert len(puts) == 102
    assert len(puts[-1].depends) == 100


def test_example_tasks_compute_the_etl_and_the_fanout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Python tasks themselves, called the way a worker would, without Redis."""
    monkeypatch.setenv("FLOWS_EXAMPLE_OUT", str(tmp_path))
    monkeypatch.syspath_prepend(str(EXAMPLES))
    sys.modules.pop("tasks", None)
    import tasks

    class Job:
        def __init__(self, **data: Any) -> None:
            self.data = data

    orders = tasks.extract_orders(Job(date="2025-01-31"))
    customers = tasks.extract_customers(Job(date="2025-01-31"))
    prices = tmp_path / "prices.json"
    prices.write_text('{"widget": 2.5, "gadget": 4.0, "gizmo": 12.0}')
    totals = tasks.transform(
        Job(orders=orders["uri"], customers=customers["uri"], prices=str(prices))
    )
    loaded = [tasks.load(Job(region=r, totals=totals["uri"])) for r in ("de", "at", "ch")]
    assert orders["count"] == 20 and sum(row["rows"] for row in loaded) <= 20
    assert tasks.extract_orders(Job(date="2025-01-31")) == orders  # deterministic
    squares = [tasks.square(Job(shard=n))["square"] for n in range(100)]
    assert tasks.total(Job(squares=squares, expected=100)) == {"total": 328350, "count": 100}
    sys.modules.pop("tasks", None)
