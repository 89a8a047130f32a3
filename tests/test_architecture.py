"""The house rules docs/ARCHITECTURE.md states, checked on the source: the floors (benchmarks -> nn ->
gpublas -> cuda_src; a package imports only from the floors below it), gpublas' folders as floors of their
own (runtime -> core -> blas -> numpy_api), nn's kernels, references and distributed packages in their
places, no import cycle between the packages' modules (deferred imports inside functions count), no folder
of more than 20 modules and no Python file over 450 lines."""
import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("gpublas", "nn", "benchmarks", "cuda_src")
FLOORS = {"cuda_src": set(), "gpublas": {"cuda_src"}, "nn": {"gpublas", "cuda_src"},
          "benchmarks": {"nn", "gpublas", "cuda_src"}}
MAX_LINES = 450
# gpublas' folders, lowest first: each imports only from itself and the folders before it
GPUBLAS_FOLDERS = ("runtime", "core", "blas", "numpy_api")
MAX_MODULES = 20


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
    assert "gpublas.runtime.launch" in graph and "nn.kernels" in graph["nn.layers.dense"]


def test_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_every_operation_device_array_calls_is_provided():
    """DeviceArray's methods call `impl.<name>` (or `reduction("<name>")`, `method("<name>", ...)`, the factories
    of gpublas.core.operations), filled by the modules above gpublas.core.array with `provide(...)` when gpublas is
    imported: each name array.py and operations.py call is there, and nothing else is."""
    from gpublas.core import array
    text = "".join((ROOT / "gpublas" / "core" / f).read_text() for f in ("array.py", "operations.py"))
    called = set(re.findall(r"\bimpl\.(\w+)\(", text)) | set(re.findall(r"\b(?:reduction|method)\(\"(\w+)\"", text))
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


def gpublas_folder(module):
    """The index of `module`'s folder in GPUBLAS_FOLDERS (gpublas.core.array -> 1); None for gpublas itself
    and its __main__, which sit above every folder."""
    parts = module.split(".")
    if parts[0] != "gpublas" or len(parts) < 2 or parts[1] == "__main__":
        return None
    assert parts[1] in GPUBLAS_FOLDERS, f"{module} is outside gpublas' folders {GPUBLAS_FOLDERS}"
    return GPUBLAS_FOLDERS.index(parts[1])


def upward_imports(graph):
    """'a imports b' for each import from a gpublas folder into a folder above it."""
    return [f"{m} imports {t}" for m, targets in graph.items() for t in targets
            if gpublas_folder(m) is not None and gpublas_folder(t) is not None and gpublas_folder(t) > gpublas_folder(m)]


def test_gpublas_folders_are_floors():
    """gpublas/ holds its four folders (and __init__, __main__), each importing only the folders below it."""
    top = sorted(p.name for p in (ROOT / "gpublas").iterdir() if p.name != "__pycache__")
    assert top == sorted(GPUBLAS_FOLDERS + ("__init__.py", "__main__.py")), top
    graph = import_graph()
    assert not upward_imports(graph), upward_imports(graph)
    # the checker sees a planted upward import (runtime reaching core)
    planted = dict(graph, **{"gpublas.runtime.launch": graph["gpublas.runtime.launch"] | {"gpublas.core.array"}})
    assert upward_imports(planted) == ["gpublas.runtime.launch imports gpublas.core.array"]


def test_no_folder_of_more_than_20_modules():
    folders = {p.parent for pkg in ("gpublas", "nn") for p in (ROOT / pkg).rglob("*.py")}
    big = {str(f.relative_to(ROOT)): n for f in folders
           if (n := len([p for p in f.glob("*.py") if p.name != "__init__.py"])) > MAX_MODULES}
    assert not big, f"over {MAX_MODULES} modules: {big}"


def test_nn_kernels_references_and_distributed_keep_their_places():
    """nn/kernels/ (launchers, one module per nn/cuda/*.cu family) imports gpublas and itself only; the NumPy
    twins in nn/reference/ are never imported by nn; nn/distributed/ is imported by no other nn package."""
    graph = import_graph()
    families = {p.stem for p in (ROOT / "nn" / "cuda").glob("*.cu")}
    launchers = {p.stem for p in (ROOT / "nn" / "kernels").glob("*.py")} - {"__init__", "common", "prefetch"}
    assert launchers <= families, launchers - families
    wrong = [f"{m} imports {t}" for m, ts in graph.items() for t in ts if m.startswith("nn.kernels")
             and t.startswith("nn.") and not t.startswith("nn.kernels")]
    wrong += [f"{m} imports {t}" for m, ts in graph.items() for t in ts if t.startswith("nn.reference")
              and m.startswith("nn.") and not m.startswith(("nn.reference", "nn.examples"))]
    wrong += [f"{m} imports {t}" for m, ts in graph.items() for t in ts if t.startswith("nn.distributed")
              and m.startswith("nn.") and not m.startswith(("nn.distributed", "nn.examples"))]
    assert not wrong, wrong
