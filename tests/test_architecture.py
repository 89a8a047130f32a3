"""The house rules docs/ARCHITECTURE.md states, checked on the source: the floors (benchmarks -> nn ->
gpublas -> cuda_src; a package imports only from the floors below it), no import cycle between the
packages' modules (deferred imports inside functions count), and no Python file over 450 lines."""
import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("gpublas", "nn", "benchmarks", "cuda_src")
FLOORS = {"cuda_src": set(), "gpublas": {"cuda_src"}, "nn": {"gpublas", "cuda_src"},
          "benchmarks": {"nn", "gpublas", "cuda_src"}}
MAX_LINES = 450


def modules():
    """{dotted module name: path} for every .py file of the packages."""
    found = {}
    for pkg in PACKAGES:
        for p in (ROOT / pkg).rglob("*.py"):
            parts = p.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return found


def imports(name, path, known):
    """The package modules `name` imports anywhere (at module level or deferred inside a function: a
    deferred import is still a dependency, and a cycle through one is still a cycle), each resolved
    to the deepest known module."""
    is_pkg = path.name == "__init__.py"
    base = name.split(".") if is_pkg else name.split(".")[:-1]
    out = set()

    def add(target):
        while target and target not in known:
            target = target.rpartition(".")[0]
        if target and target != name:
            out.add(target)

    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for a in node.names:
                add(a.name)
        elif isinstance(node, ast.ImportFrom):
            mod = ".".join(base[:len(base) - node.level + 1] + ([node.module] if node.module else [])) \
                if node.level else node.module
            for a in node.names:
                add(f"{mod}.{a.name}" if f"{mod}.{a.name}" in known else mod)
    return out


def import_graph():
    known = modules()
    return {name: imports(name, path, known) for name, path in known.items()}


def find_cycle(graph):
    """One cycle as a list of modules (first == last), or None."""
    state, stack = {}, []

    def dfs(n):
        state[n] = "open"
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == "open":
                return stack[stack.index(m):] + [m]
            if m not in state:
                found = dfs(m)
                if found:
                    return found
        stack.pop()
        state[n] = "done"
        return None

    for n in sorted(graph):
        if n not in state:
            found = dfs(n)
            if found:
                return found
    return None


def test_cycle_finder_finds_a_planted_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
    graph = import_graph()
    assert "gpublas.launch" in graph and "nn.kernels" in graph["nn.layers.dense"]


def test_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_every_operation_device_array_calls_is_provided():
    """DeviceArray's methods call `impl.<name>` (or `_reduction("<name>")`, `_method("<name>", ...)`),
    filled by the modules above gpublas.array with `provide(...)` when gpublas is imported: each name
    array.py calls is there, and nothing else is."""
    from gpublas import array
    text = (ROOT / "gpublas" / "array.py").read_text()
    called = set(re.findall(r"\bimpl\.(\w+)\(", text)) | set(re.findall(r"_(?:reduction|method)\(\"(\w+)\"", text))
    assert {"getitem", "forward", "sum", "any", "to_dlpack"} <= called
    assert called == set(vars(array.impl)), called ^ set(vars(array.impl))


def test_each_package_imports_only_the_floors_below_it():
    wrong = [f"{m} imports {t}" for m, targets in import_graph().items() for t in targets
             if t.split(".")[0] != m.split(".")[0] and t.split(".")[0] not in FLOORS[m.split(".")[0]]]
    assert not wrong, wrong


def test_no_python_file_over_450_lines():
    files = [p for p in ROOT.rglob("*.py") if not {".venv", "build", ".git"} & set(p.relative_to(ROOT).parts)]
    assert len(files) > 50
    long = {str(p.relative_to(ROOT)): n for p in files if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"over {MAX_LINES} lines: {long}"
