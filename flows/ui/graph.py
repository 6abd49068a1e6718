"""The job graph of a run page: its steps layered by their needs, as boxes for an SVG.

The needs come from the graph the run carries since its submission (the run record's
``graph``: :mod:`flows.runs.graph`), so a run is drawn as it was submitted wherever it came from
and whatever became of its file. A run submitted without one (by an older version) falls back
to its own flow file when it is still there unchanged, else to the flow the scheduler service
registered under the run's flow name; a run with none of these is drawn as one column in
submission order, which is a dependency order. A ``foreach`` step is one node whatever its item
count.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import networkx as nx

from flows.expand.run_specs import content_hash
from flows.flowfile.yaml_reader import RefusedFile, read_text
from flows.validation.validate import validate_text
from scheduler.engine.client import Client
from scheduler.service.schedules import Schedules

NODE_WIDTH = 180
NODE_HEIGHT = 46
GAP_X = 60
GAP_Y = 18


@dataclass(frozen=True)
class Node:
    step: str
    x: int
    y: int


@dataclass(frozen=True)
class Edge:
    x1: int
    y1: int
    x2: int
    y2: int


@dataclass(frozen=True)
class Layout:
    nodes: list[Node]
    edges: list[Edge]
    width: int
    height: int
    from_flow: bool
    """Whether the needs came from the run's flow (else: one column, no edges)."""


@functools.lru_cache(maxsize=64)
def _needs_of(source: str, file: str) -> Mapping[str, tuple[str, ...]] | None:
    result = validate_text(source, file=file, flow_dir=Path(file).parent)
    if result.flow is None:
        return None
    return {name: tuple(step.needs) for name, step in result.flow.steps.items()}


def run_needs(
    client: Client, record: Mapping[str, object], graph: Mapping[str, Any] | None = None
) -> Mapping[str, tuple[str, ...]] | None:
    """Each step's needs in the flow a run was made from (see the module's docstring)."""
    steps = graph.get("steps") if graph else None
    if isinstance(steps, Mapping):
        return {
            str(name): tuple(str(n) for n in (entry.get("needs") or []))
            for name, entry in steps.items()
            if isinstance(entry, Mapping)
        }
    file, wanted = str(record.get("file") or ""), str(record.get("hash") or "")
    if file and wanted:
        try:
            text = read_text(Path(file))  # as the run read it: its hash is of that text
        except (OSError, RefusedFile):
            text = None
        if text is not None and content_hash(text) == wanted:
            return _needs_of(text, file)
    return flow_needs(client, str(record.get("flow") or ""))


def flow_needs(client: Client, flow: str) -> Mapping[str, tuple[str, ...]] | None:
    """Each step's needs in the registered flow ``flow``, or None when it is not registered."""
    registration = Schedules(client).get(flow, skips=0) if flow else None
    if registration is None:
        return None
    definition = registration.definition
    return _needs_of(definition.source, definition.file)


def layout(steps: Sequence[str], needs: Mapping[str, tuple[str, ...]] | None) -> Layout:
    """Boxes left to right by dependency layer; steps (and hooks) the flow does not list go in
    a last layer of their own."""
    graph: nx.DiGraph = nx.DiGraph()
    graph.add_nodes_from(steps)
    known = needs is not None
    for step in steps:
        for need in (needs or {}).get(step, ()):
            if need in graph:
                graph.add_edge(need, step)
    if known and nx.is_directed_acyclic_graph(graph):
        listed = [s for s in steps if s in (needs or {})]
        layers = [
            [s for s in layer if s in listed]
            for layer in nx.topological_generations(graph.subgraph(listed))
        ]
        extra = [s for s in steps if s not in (needs or {})]
        if extra:
            layers.append(extra)
    else:
        known, layers = False, [list(steps)]
    order = {step: i for i, step in enumerate(steps)}
    places: dict[str, tuple[int, int]] = {}
    for column, layer in enumerate(layers):
        for row, step in enumerate(sorted(layer, key=order.__getitem__)):
            places[step] = (column * (NODE_WIDTH + GAP_X), row * (NODE_HEIGHT + GAP_Y))
    nodes = [Node(step, *places[step]) for step in steps]
    edges = (
        [
            Edge(
                places[a][0] + NODE_WIDTH,
                places[a][1] + NODE_HEIGHT // 2,
                places[b][0],
                places[b][1] + NODE_HEIGHT // 2,
            )
            for a, b in graph.edges
        ]
        if known
        else []
    )
    width = max((n.x for n in nodes), default=0) + NODE_WIDTH
    height = max((n.y for n in nodes), default=0) + NODE_HEIGHT
    return Layout(nodes, edges, width, height, known)
