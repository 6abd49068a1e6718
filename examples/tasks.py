"""The Python jobs the example flows name (``job: tasks.<function>``).

Each takes the running job (``job.data`` is the step's ``with``, upstream outputs resolved) and
returns a dict: the step's outputs. Data is small, deterministic (seeded by the date) and lives
under ``$FLOWS_EXAMPLE_OUT`` (default: ``<temp dir>/flows-example``), one folder per date.
"""

from __future__ import annotations

import json
import os
import random
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any, Protocol

PRODUCTS = ("widget", "gadget", "gizmo")
CUSTOMER_REGIONS = {"c1": "de", "c2": "at", "c3": "ch", "c4": "de", "c5": "fr"}


class Job(Protocol):
    """What these functions use of the job the worker passes in."""

    data: dict[str, Any]


def _folder(date: str) -> Path:
    root = os.environ.get("FLOWS_EXAMPLE_OUT") or Path(tempfile.gettempdir()) / "flows-example"
    folder = Path(root) / date
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _write(path: Path, value: Any) -> str:
    path.write_text(json.dumps(value, indent=1))
    return str(path)


def _read(uri: str) -> Any:
    return json.loads(Path(uri).read_text())


# -- sales-etl --------------------------------------------------------------------------------


def extract_orders(job: Job) -> dict[str, Any]:
    """Twenty orders of the day: customer, product, quantity."""
    date = job.data["date"]
    rng = random.Random(f"orders-{date}")
    orders = [
        {
            "id": f"{date}-{number:03d}",
            "customer": rng.choice(sorted(CUSTOMER_REGIONS)),
            "product": rng.choice(PRODUCTS),
            "quantity": rng.randint(1, 5),
        }
        for number in range(20)
    ]
    return {"uri": _write(_folder(date) / "orders.json", orders), "count": len(orders)}


def extract_customers(job: Job) -> dict[str, Any]:
    """Customers and the region each one buys from."""
    date = job.data["date"]
    customers = [{"id": cid, "region": region} for cid, region in CUSTOMER_REGIONS.items()]
    return {"uri": _write(_folder(date) / "customers.json", customers), "count": len(customers)}


def transform(job: Job) -> dict[str, Any]:
    """Join orders with customers and prices: revenue and order count per region."""
    orders = _read(job.data["orders"])
    regions = {c["id"]: c["region"] for c in _read(job.data["customers"])}
    prices = _read(job.data["prices"])
    totals: dict[str, dict[str, float]] = defaultdict(lambda: {"orders": 0, "revenue": 0.0})
    for order in orders:
        region = totals[regions[order["customer"]]]
        region["orders"] += 1
        region["revenue"] += order["quantity"] * prices[order["product"]]
    folder = Path(job.data["orders"]).parent
    uri = _write(folder / "totals.json", dict(sorted(totals.items())))
    return {"uri": uri, "regions": sorted(totals)}


def load(job: Job) -> dict[str, Any]:
    """Load one region's totals (here: into its own file)."""
    region = job.data["region"]
    totals = _read(job.data["totals"]).get(region, {"orders": 0, "revenue": 0.0})
    target = Path(job.data["totals"]).parent / f"loaded-{region}.json"
    _write(target, {"region": region, **totals})
    return {"region": region, "rows": totals["orders"], "revenue": round(totals["revenue"], 2)}


# -- fanout -----------------------------------------------------------------------------------


def plan_shards(job: Job) -> dict[str, Any]:
    """How many shards the fan-out has, for the fan-in to check."""
    return {"count": len(job.data["shards"])}


def square(job: Job) -> dict[str, Any]:
    shard = int(job.data["shard"])
    return {"shard": shard, "square": shard * shard}


def total(job: Job) -> dict[str, Any]:
    """Add up the squares of every shard (a foreach step's outputs arrive in item order)."""
    squares = job.data["squares"]
    if len(squares) != int(job.data["expected"]):
        raise ValueError(f"expected {job.data['expected']} squares, got {len(squares)}")
    return {"total": sum(squares), "count": len(squares)}


# -- files (a fan-out from an output) ----------------------------------------------------------


def list_files(job: Job) -> dict[str, Any]:
    """Write the day's CSV files (how many depends on the day) and list their names."""
    day = job.data["day"]
    rng = random.Random(f"files-{day}")
    folder = _folder(day) / "files"
    folder.mkdir(exist_ok=True)
    files = []
    for index in range(rng.randint(3, 8)):
        name = f"part-{index:02d}.csv"
        rows = [f"{rng.randint(1, 999)},{rng.choice(PRODUCTS)}" for _ in range(rng.randint(1, 50))]
        (folder / name).write_text("\n".join(["amount,product", *rows]) + "\n")
        files.append(name)
    return {"folder": str(folder), "files": files}


def count_rows(job: Job) -> dict[str, Any]:
    """The rows of one file (the header left out)."""
    path = Path(job.data["folder"]) / job.data["name"]
    return {"file": job.data["name"], "rows": len(path.read_text().splitlines()) - 1}


def sum_rows(job: Job) -> dict[str, Any]:
    """Add up the rows of every file (a fan-out step's outputs arrive in item order)."""
    return {"files": len(job.data["rows"]), "rows": sum(job.data["rows"])}


# -- nightly-report ---------------------------------------------------------------------------


def summarise_day(job: Job) -> dict[str, Any]:
    """A day's revenue (made up, but the same for the same day)."""
    day = job.data["day"]
    rng = random.Random(f"summary-{day}")
    revenue = round(sum(rng.uniform(10, 100) for _ in range(20)), 2)
    _write(_folder(day) / "summary.json", {"day": day, "revenue": revenue})
    return {"day": day, "revenue": revenue}
