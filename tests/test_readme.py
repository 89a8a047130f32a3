"""README.md's ```python blocks run as written, so its snippets stay true.

Each `## ` section is one test: its blocks run in order in one fresh namespace (a later block of a
section may use what an earlier one made). On the sim backend a line ending in `# cuda only` is left
out, and a block whose first line carries that marker is left out whole; on the cuda backend a
line or block marked `# sim only` is. A section whose snippets need an optional package that is
not installed (PyTorch, CuPy, scikit-learn for the digits data) skips, naming it.
"""
import re
from pathlib import Path

import pytest

import gpublas

README = Path(__file__).resolve().parent.parent / "README.md"
FENCE = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
OPTIONAL = {"torch", "cupy", "mpi4py"}


def sections():
    """[(title, [(line number, code), ...])] for every section that holds a python block."""
    text = README.read_text()
    found = {}
    for m in FENCE.finditer(text):
        start = text.count("\n", 0, m.start()) + 2  # the line after the fence
        heading = [h for h in re.findall(r"^## (.+)$", text[:m.start()], re.M)] or ["(top)"]
        found.setdefault(heading[-1], []).append((start, m.group(1)))
    return list(found.items())


def runnable(code, backend):
    """The block as this backend runs it: marked lines blanked (line numbers kept), or None."""
    skip = "# cuda only" if backend == "sim" else "# sim only"
    lines = code.splitlines()
    if lines and skip in lines[0]:
        return None
    return "\n".join("" if skip in line else line for line in lines) + "\n"


def test_readme_has_the_snippets_it_promises():
    titles = [t for t, _ in sections()]
    assert {"A tour of gpublas", "A tour of nn", "The API"} <= set(titles), titles
    assert sum(len(blocks) for _, blocks in sections()) >= 10
    for code in (c for _, blocks in sections() for _, c in blocks):
        for line in code.splitlines():  # a marker is a whole comment, not a word in some other one
            assert "cuda only" not in line or line.rstrip().endswith("# cuda only"), line


@pytest.mark.parametrize("title,blocks", sections(), ids=[t for t, _ in sections()])
def test_readme_section_runs(title, blocks, capsys):
    namespace = {"__name__": "readme"}
    for start, code in blocks:
        code = runnable(code, gpublas.backend())
        if code is None:
            continue
        try:
            exec(compile("\n" * (start - 1) + code, str(README), "exec"), namespace)
        except ModuleNotFoundError as e:
            if e.name in OPTIONAL:
                pytest.skip(f"{title}: needs {e.name}")
            raise
        except SystemExit as e:  # nn.examples' data loaders exit naming a missing scikit-learn
            if "scikit-learn" in str(e):
                pytest.skip(f"{title}: needs scikit-learn")
            raise
    capsys.readouterr()
