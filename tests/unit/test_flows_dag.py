"""The step graph: the order of expansion and the cycles validation reports, against networkx."""

from __future__ import annotations

from itertools import pairwise

import networkx as nx
from hypothesis import given, settings
from hypothesis import strategies as st

from flows.flowfile.dag import Ancestry, cycles, flow_graph, step_graph, topological_steps
from flows.flowfile.model import Flow


@st.composite
def needs_maps(draw: st.DrawFn) -> dict[str, list[str]]:
    """Any needs: cycles, a step needing itself, needs listed twice, needs naming no step."""
    size = draw(st.integers(min_value=0, max_value=12))
    names = st.sampled_from([f"s{index}" for index in range(size + 2)])  # two unknown names
    return {f"s{index}": draw(st.lists(names, max_size=4)) for index in range(size)}


@st.composite
def acyclic_flows(draw: st.DrawFn) -> Flow:
    """Steps needing earlier-numbered steps (some twice), written in a shuffled order."""
    size = draw(st.integers(min_value=1, max_value=20))
    order = draw(st.permutations(range(size)))
    steps = {
        f"s{index}": {
            "run": "x",
            "needs": [f"s{need}" for need in draw(st.lists(st.integers(0, index - 1), max_size=4))]
            if index
            else [],
        }
        for index in order
    }
    return Flow.model_validate({"version": 1, "name": "p", "steps": steps})


@settings(max_examples=200, deadline=None)
@given(acyclic_flows())
def test_expansion_order_is_networkx_lexicographical_order(flow: Flow) -> None:
    written = {step_id: index for index, step_id in enumerate(flow.steps)}
    graph = flow_graph(flow)
    expected = list(nx.lexicographical_topological_sort(graph, key=written.__getitem__))
    assert topological_steps(flow) == expected


@settings(max_examples=300, deadline=None)
@given(needs_maps())
def test_cycles_are_reported_exactly_when_steps_need_each_other(
    needs: dict[str, list[str]],
) -> None:
    tangles = [c for c in nx.strongly_connected_components(step_graph(needs)) if len(c) > 1]
    found = cycles(needs)
    assert len(found) == len(tangles)
    for cycle in found:
        assert cycle[0] == cycle[-1]
        assert all(need in needs[step] for step, need in pairwise(cycle))


@settings(max_examples=300, deadline=None)
@given(needs_maps(), st.sampled_from([f"s{index}" for index in range(14)]), st.data())
def test_ancestry_is_networkx_has_path(
    needs: dict[str, list[str]], source: str, data: st.DataObject
) -> None:
    graph = step_graph(needs)
    ancestry = Ancestry(needs)
    for target in [*needs, "s13", data.draw(st.sampled_from([*needs, "other"]))]:
        expected = graph.has_node(source) and graph.has_node(target)
        expected = expected and nx.has_path(graph, source, target)
        assert ancestry.reaches(source, target) == expected, (source, target)


@settings(max_examples=200, deadline=None)
@given(acyclic_flows())
def test_ancestry_of_an_acyclic_flow_is_networkx_has_path(flow: Flow) -> None:
    needs = {step_id: step.needs for step_id, step in flow.steps.items()}
    graph, ancestry = step_graph(needs), Ancestry(needs)
    assert ancestry.position is not None  # the search is pruned by the order
    for source in needs:
        for target in needs:
            assert ancestry.reaches(source, target) == nx.has_path(graph, source, target)
