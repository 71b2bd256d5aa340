"""No two of the project's modules import each other, directly or round a loop: a follow-up
is enqueued by task name (lifecycle/follow_ups.py, replay/kick.py), never by importing the task
that calls back into its service. `.importlinter`'s acyclic contracts check lifecycle's and
replay's sibling packages; this checks every module, inside packages too."""

from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("cauterweb", "dashboard", "replay", "lifecycle", "comparison", "traces")
# A package's __init__ that re-exports a submodule which reads names from that __init__: the
# engine's randomized design (replay/engine/__init__.py imports it at its end, after the names
# it reads). A package and its own child, not two modules that need each other.
PACKAGE_AND_CHILD = {frozenset({"replay.engine", "replay.engine.randomized"})}


def cycles(graph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append(
                        (child, iter(sorted(graph.find_modules_directly_imported_by(child))))
                    )
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_module_imports_itself_round_a_loop(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    loops = [c for c in cycles(graph) if frozenset(c) not in PACKAGE_AND_CHILD]
    assert loops == []


def test_the_cycle_finder_finds_a_loop():
    graph = grimp.ImportGraph()
    for importer, imported in [("a.x", "a.y"), ("a.y", "a.z"), ("a.z", "a.x"), ("a.z", "a.w")]:
        graph.add_import(importer=importer, imported=imported)
    assert cycles(graph) == [["a.x", "a.y", "a.z"]]
