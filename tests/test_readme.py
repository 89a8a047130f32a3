"""README.md's and docs/*.md's ```python blocks run as written, so their snippets stay true.

README: every block runs alone in a fresh interpreter (a newcomer copies one block, not the page), so a
block that leans on an earlier one fails with its NameError. docs/: a page's blocks run in order in one
fresh namespace (a later block may use what an earlier one made), one test per page; a block whose first
line is a `# sketch` comment is an outline with names the reader supplies, and is not run. On the sim
backend a line ending in `# cuda only` is left out, and a block whose first line carries that marker is
left out whole; on the cuda backend a line or block marked `# sim only` is. A snippet that needs an
optional package that is not installed (PyTorch, CuPy, scikit-learn for the digits data) skips, naming it.
"""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import gpublas

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
FENCE = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
OPTIONAL = {"torch", "cupy", "mpi4py"}


def blocks(path):
    """[(section title, line number of the block's first line, code)] for every python block of `path`."""
    text = path.read_text()
    found = []
    for m in FENCE.finditer(text):
        start = text.count("\n", 0, m.start()) + 2  # the line after the fence
        heading = re.findall(r"^##+ (.+)$", text[:m.start()], re.M) or ["(top)"]
        found.append((heading[-1], start, m.group(1)))
    return found


def runnable(code, backend):
    """The block as this backend runs it: marked lines blanked (line numbers kept), or None."""
    skip = "# cuda only" if backend == "sim" else "# sim only"
    lines = code.splitlines()
    if lines and (skip in lines[0] or lines[0].startswith("# sketch")):
        return None
    return "\n".join("" if skip in line else line for line in lines) + "\n"


def skip_reason(error_text):
    """The optional package a failed snippet needed, as a skip message, or None."""
    m = re.search(r"ModuleNotFoundError: No module named '([\w.]+)'", error_text)
    if m and m.group(1).split(".")[0] in OPTIONAL:
        return f"needs {m.group(1)}"
    if "scikit-learn" in error_text:  # nn.examples' data loaders exit naming a missing scikit-learn
        return "needs scikit-learn"
    return None


README_BLOCKS = blocks(README)


def test_readme_is_the_short_guide_it_promises():
    text = README.read_text()
    titles = set(re.findall(r"^## (.+)$", text, re.M))
    assert {"Install and the main job", "A tour of gpublas", "A tour of nn", "The API map",
            "Backends and GPU setup"} <= titles, titles
    assert len(text.splitlines()) <= 320, "README is a guide: logs and figures go to docs/"
    assert "python -m pytest -n 2 tests" in text  # .ci/run runs this command
    assert len(README_BLOCKS) >= 6
    for path in [README, *DOCS]:
        for _, _, code in blocks(path):
            for line in code.splitlines():  # a marker is a whole comment, not a word in some other one
                assert "cuda only" not in line or line.rstrip().endswith("# cuda only"), (path.name, line)


@pytest.mark.parametrize("title,start,code", README_BLOCKS, ids=[f"{t} (line {s})" for t, s, _ in README_BLOCKS])
def test_readme_block_runs_alone_in_a_fresh_interpreter(title, start, code):
    code = runnable(code, gpublas.backend())
    if code is None:
        pytest.skip(f"{title}: not for the {gpublas.backend()} backend")
    runner = ("import sys; exec(compile(sys.stdin.read(), sys.argv[1], 'exec'), {'__name__': '__main__'})")
    env = dict(os.environ, GPUBLAS_BACKEND=gpublas.backend())
    proc = subprocess.run([sys.executable, "-c", runner, str(README)], input="\n" * (start - 1) + code,
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    if proc.returncode != 0:
        reason = skip_reason(proc.stderr)
        if reason:
            pytest.skip(f"{title}: {reason}")
    assert proc.returncode == 0, proc.stderr[-4000:]


@pytest.mark.parametrize("path", [p for p in DOCS if blocks(p)], ids=lambda p: p.name)
def test_doc_blocks_run_in_order(path, capsys):
    namespace = {"__name__": "doc"}
    for title, start, code in blocks(path):
        code = runnable(code, gpublas.backend())
        if code is None:
            continue
        try:
            exec(compile("\n" * (start - 1) + code, str(path), "exec"), namespace)
        except ModuleNotFoundError as e:
            if e.name in OPTIONAL:
                pytest.skip(f"{path.name}, {title}: needs {e.name}")
            raise
        except SystemExit as e:
            if "scikit-learn" in str(e):
                pytest.skip(f"{path.name}, {title}: needs scikit-learn")
            raise
    capsys.readouterr()
