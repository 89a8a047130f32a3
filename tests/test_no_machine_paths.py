"""No tracked file names a path of the machine that wrote it (a home, /root or /work directory):
benchmark logs and JSON name their files relative to the project, comments name no local folders."""
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# an absolute path into a home, /root or /work directory, at the start of a word
MACHINE_PATH = re.compile(r"(?:^|[\s\"'(=:`])/(?:home|root|work|Users)/[\w.-]+")


def test_tracked_files_name_no_machine_paths():
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: no list of tracked files")
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    found = []
    for name in filter(None, files.decode().split("\0")):
        path = ROOT / name
        if path.suffix in (".png", ".jpg", ".gz", ".whl") or not path.is_file():
            continue
        text = path.read_text(errors="ignore")
        found += [f"{name}:{text.count(chr(10), 0, m.start()) + 1}: {m.group().strip()}"
                  for m in MACHINE_PATH.finditer(text)]
    assert not found, "machine paths in tracked files (write them relative to the project):\n" + "\n".join(found)
