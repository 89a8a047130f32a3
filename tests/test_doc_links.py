"""Every relative link of README.md and docs/*.md points at a file that exists, and every #anchor at a
heading of its target (GitHub's slugs), so moving text between the guide and docs/ breaks no link."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped (but - and _), spaces to -."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path):
    return {slug(h) for h in re.findall(r"^#+ (.+)$", FENCE.sub("", path.read_text()), re.M)}


def test_slugs_are_githubs():
    assert slug("Dtypes and NumPy's rules") == "dtypes-and-numpys-rules"
    assert slug("Threads, faults and Ctrl-C") == "threads-faults-and-ctrl-c"
    assert slug("Setup: from clone to `gpu_check.sh`") == "setup-from-clone-to-gpu_checksh"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(page):
    bad = []
    for target in LINK.findall(FENCE.sub("", page.read_text())):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        dest = (page.parent / file).resolve() if file else page
        if not dest.exists():
            bad.append(f"{target}: no {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest}")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{target}: no heading #{anchor} in {dest.name}")
    assert not bad, bad
