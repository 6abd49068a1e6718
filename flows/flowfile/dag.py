"""The step graph of a flow: edges from each need to the step that needs it.

Used for the order of expansion (topological, ties broken by the order steps are written in),
for the graph checks, and for ``flows graph`` (Mermaid and DOT).
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from flows.flowfile.conditions import expression_of
from flows.flowfile.model import Flow, Step

if TYPE_CHECKING:  # networkx is imported where a graph is built: a tenth of a second, which
    # `flows run` and `flows validate` of a flow without a cycle never need to spend
    import networkx as nx


def step_graph(needs: Mapping[str, Sequence[str]]) -> nx.DiGraph:
    """A graph with one node per step id and an edge ``need -> step`` for each known need.

    Needs that name no step are left out (validation reports them).
    """
    import networkx as nx

    graph = nx.DiGraph()
    graph.add_nodes_from(needs)
    graph.add_edges_from(
        (need, step) for step, wanted in needs.items() for need in wanted if need in needs
    )
    return graph


def flow_graph(flow: Flow) -> nx.DiGraph:
    """The step graph of a valid flow."""
    return step_graph({step_id: step.needs for step_id, step in flow.steps.items()})


def topological_steps(flow: Flow) -> list[str]:
    """Step ids, each after all it needs; among the free ones, the first written goes first.

    Raises ``networkx.NetworkXUnfeasible`` on a cycle (validation reports cycles first).
    """
    order = _kahn({step_id: step.needs for step_id, step in flow.steps.items()})
    if len(order) < len(flow.steps):
        import networkx as nx

        written = {step_id: index for index, step_id in enumerate(flow.steps)}
        # Only networkx's error is wanted here: the same message as ever for a cycle.
        list(nx.lexicographical_topological_sort(flow_graph(flow), key=written.__getitem__))
    return order


def _kahn(needs: Mapping[str, Sequence[str]]) -> list[str]:
    """The steps Kahn's algorithm can order (all of them unless there is a cycle), each after
    its known needs; among the free ones the first in ``needs`` goes first.

    The same order as ``nx.lexicographical_topological_sort`` keyed by that position, without
    building a graph: this runs for every expansion and validation of flows of 10,000 steps.
    """
    ids = list(needs)
    position = {step_id: index for index, step_id in enumerate(ids)}
    # The usual file lists each step after what it needs: then the order is the written one
    # (the first free step is always the next written), found without the heap.
    at = position.get
    if all(at(need, -1) < index for index, wanted in enumerate(needs.values()) for need in wanted):
        return ids
    dependents: dict[str, list[str]] = {step_id: [] for step_id in ids}
    waiting: dict[str, int] = {}
    for step_id, wanted in needs.items():
        known = [need for need in dict.fromkeys(wanted) if need in position]
        for need in known:
            dependents[need].append(step_id)
        waiting[step_id] = len(known)
    ready = [position[step_id] for step_id in ids if not waiting[step_id]]  # sorted: a heap
    order: list[str] = []
    while ready:
        step_id = ids[heapq.heappop(ready)]
        order.append(step_id)
        for dependent in dependents[step_id]:
            waiting[dependent] -= 1
            if not waiting[dependent]:
                heapq.heappush(ready, position[dependent])
    return order


class Ancestry:
    """Whether a step is done before another, asked many times of one flow's needs (step id →
    its needs), without building a graph: validation asks once for each template that reads a
    step beyond the reader's own needs.

    A search back from the later step over needs, which never follows a step placed before the
    earlier one in the topological order: no such step can lead to it. (With a cycle there is
    no such order, and the search goes everywhere it can.)
    """

    def __init__(self, needs: Mapping[str, Sequence[str]]) -> None:
        self.needs = needs
        order = _kahn(needs)
        self.position: dict[str, int] | None = (
            {step_id: index for index, step_id in enumerate(order)}
            if len(order) == len(needs)
            else None
        )

    def reaches(self, source: str, target: str) -> bool:
        """Whether ``target`` is ``source`` or needs it, directly or through other steps; as
        ``networkx.has_path(step_graph(needs), source, target)``: False when either is no step
        of ``needs``."""
        needs, position = self.needs, self.position
        if source not in needs or target not in needs:
            return False
        floor = position[source] if position is not None else -1
        seen, todo = {target}, [target]
        while todo:
            step_id = todo.pop()
            if step_id == source:
                return True
            for need in needs[step_id]:
                if need in seen or need not in needs:
                    continue
                if position is not None and position[need] < floor:
                    continue
                seen.add(need)
                todo.append(need)
        return False


def upstream(graph: nx.DiGraph, step_id: str) -> set[str]:
    """Every step that is done before ``step_id`` starts: its needs, their needs, and so on."""
    import networkx as nx

    return set(nx.ancestors(graph, step_id))


def cycles(needs: Mapping[str, Sequence[str]]) -> list[list[str]]:
    """One cycle per tangle of steps, each as ``[a, b, ..., a]`` in the direction *a needs b*.

    A step needing itself is not one (it is reported on its own).
    """
    if len(_kahn(needs)) == len(needs):
        return []  # the usual case, found without building a graph
    import networkx as nx

    graph = step_graph(needs)
    found: list[list[str]] = []
    for component in nx.strongly_connected_components(graph):
        if len(component) < 2:
            continue  # a step needing itself is reported on its own
        sub = graph.subgraph(component)
        start = min(component)
        edges = nx.find_cycle(sub, source=start)
        dependents = [edge[0] for edge in edges]  # need -> step, so reversed reads "needs"
        path = [dependents[0], *reversed(dependents[1:])]
        found.append([*path, path[0]])
    return sorted(found)


def _label(step_id: str, step: Step) -> str:
    label = step_id
    if step.foreach is not None:
        label += f" (foreach {step.foreach.as_})"
    if step.matrix is not None:
        label += f" (matrix {' x '.join(step.matrix)})"
    if step.trigger_rule != "all_success":
        label += f" [{step.trigger_rule}]"
    if step.if_ is not None:
        label += f" if {expression_of(step.if_)}"
    if step.wait is not None:
        label += f" (wait for signal {step.wait.signal})"
    return label


def _hooks(flow: Flow) -> Iterable[tuple[str, str]]:
    rules = {"on_success": "all_success", "on_failure": "one_failed", "finally": "all_done"}
    for name, _ in flow.hooks.defined():
        yield name, f"{name} [{rules[name]}]"


def to_mermaid(flow: Flow) -> str:
    """A Mermaid flowchart; hooks hang off the steps nothing else needs, with dotted arrows."""
    graph = flow_graph(flow)
    ids = {step_id: f"s{index}" for index, step_id in enumerate(flow.steps)}
    lines = ["flowchart LR"]
    for step_id, step in flow.steps.items():
        shape = ("[[", "]]") if step.fans_out else ("[", "]")
        lines.append(
            f'    {ids[step_id]}{shape[0]}"{_mermaid_text(_label(step_id, step))}"{shape[1]}'
        )
    for need, step_id in graph.edges:
        lines.append(f"    {ids[need]} --> {ids[step_id]}")
    sinks = [step_id for step_id in flow.steps if graph.out_degree(step_id) == 0]
    for index, (_, label) in enumerate(_hooks(flow)):
        node = f"h{index}"
        lines.append(f'    {node}(["{_mermaid_text(label)}"])')
        lines.extend(f"    {ids[sink]} -.-> {node}" for sink in sinks)
    return "\n".join(lines) + "\n"


def _mermaid_text(text: str) -> str:
    # Mermaid reads labels as HTML: a condition's '<' must stay text.
    return text.replace('"', "#quot;").replace("<", "#lt;").replace(">", "#gt;")


def to_dot(flow: Flow) -> str:
    """A Graphviz DOT digraph; foreach and matrix steps are drawn stacked, hooks dashed."""
    graph = flow_graph(flow)
    quote = json.dumps  # a JSON string is a valid DOT quoted id
    lines = [f"digraph {quote(flow.name)} {{", "    rankdir=LR;", "    node [shape=box];"]
    for step_id, step in flow.steps.items():
        style = ", shape=box3d" if step.fans_out else ""
        lines.append(f"    {quote(step_id)} [label={quote(_label(step_id, step))}{style}];")
    for need, step_id in graph.edges:
        lines.append(f"    {quote(need)} -> {quote(step_id)};")
    sinks = [step_id for step_id in flow.steps if graph.out_degree(step_id) == 0]
    for name, label in _hooks(flow):
        lines.append(f"    {quote(name)} [label={quote(label)}, shape=oval, style=dashed];")
        lines.extend(f"    {quote(sink)} -> {quote(name)} [style=dashed];" for sink in sinks)
    lines.append("}")
    return "\n".join(lines) + "\n"
