"""The house rules that keep the pipeline visible: no import cycles, the stages import under
`dsh_memory.` only, each shared constant defined once, no oversized modules without a reason."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
STAGES = ("flows", "tasks", "blocks")


def _modules() -> dict[str, Path]:
    """Dotted name → file, with the repo's top-level stages under their installed names."""
    mods: dict[str, Path] = {}
    for base in ("dsh_memory", *STAGES):
        for p in (REPO / base).rglob("*.py"):
            parts = list(p.relative_to(REPO).with_suffix("").parts)
            if parts[0] != "dsh_memory":
                parts.insert(0, "dsh_memory")
            if parts[-1] == "__init__":
                parts.pop()
            mods[".".join(parts)] = p
    return mods


def _imports(path: Path) -> list[str]:
    """Every absolute import in the file, at any depth (lazy imports inside functions count)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append(node.module)
            out += [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            out += [a.name for a in node.names]
    return out


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        found.append(sorted(comp))
    return found


def test_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    mods = _modules()
    graph = {m: {n for n in _imports(p) if n in mods and n != m} for m, p in mods.items()}
    # A package importing its own submodules (re-exports in __init__) is not a cycle between stages.
    for m in graph:
        graph[m] = {n for n in graph[m] if not n.startswith(m + ".")}
    assert _cycles(graph) == []


@pytest.mark.parametrize("stage", STAGES)
def test_stages_import_only_under_the_package_name(stage):
    """A wheel has no top-level flows/tasks/blocks: importing them bare works only in a checkout."""
    offenders = []
    for base in ("dsh_memory", *STAGES, "tests", "bench", "tools"):
        for p in (REPO / base).rglob("*.py"):
            for name in _imports(p):
                if name == stage or name.startswith(stage + "."):
                    offenders.append(f"{p.relative_to(REPO)}: {name}")
    assert offenders == []


@pytest.mark.parametrize("name", ["MAX_BODY_BYTES", "RESOURCE_PREFIX", "prefect_api_url", "LOOPBACK_HOSTS"])
def test_shared_constants_are_defined_once(name):
    where = []
    for p in _modules().values():
        for node in ast.parse(p.read_text()).body:
            targets = []
            if isinstance(node, ast.Assign):
                targets = [t.id for t in node.targets if isinstance(t, ast.Name)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                targets = [node.target.id]
            elif isinstance(node, ast.FunctionDef | ast.ClassDef):
                targets = [node.name]
            if name in targets:
                where.append(str(p.relative_to(REPO)))
    assert len(where) == 1, where


def test_no_loose_stage_modules_at_the_package_top():
    """dsh_memory/ holds stage folders plus a handful of shared modules."""
    loose = sorted(p.stem for p in (REPO / "dsh_memory").glob("*.py") if p.stem != "__init__")
    assert loose == ["cancel", "context", "errors", "models", "progress", "scope", "settings", "settings_loader"]


def test_readme_layout_matches_the_tree():
    """docs/architecture.md's code layout names every folder of dsh_memory/ (and nothing that is gone)."""
    import re

    text = (REPO / "docs" / "architecture.md").read_text()
    block = text.split("<!-- layout:start -->", 1)[1].split("<!-- layout:end -->", 1)[0]
    listed = set(re.findall(r"^  ([a-z0-9_]+)/", block, flags=re.M))
    folders = {p.parent.name for p in (REPO / "dsh_memory").glob("*/__init__.py")} | {"samples"}
    assert listed == folders
    modules = {p.stem for p in (REPO / "dsh_memory").glob("*.py")} - {"__init__"}
    assert all(f"{m}.py" in block for m in modules), sorted(m for m in modules if f"{m}.py" not in block)
