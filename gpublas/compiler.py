"""One compile path for both backends: CUDA C source -> a loadable binary, cached on disk.

The cache key covers the source, every header in cuda_src/ and the simulation header, the defines,
the backend's compiler command and its version (as PyCUDA's compiler.py does). A failed compile
raises CompileError with the compiler's log and the first file:line it names.
"""
import hashlib
import os
import re
import subprocess
import tempfile
from pathlib import Path

from .errors import CompileError

_ERROR_LINE = re.compile(r"^(?P<file>[^\s:][^:\n]*?)[:(](?P<line>\d+)(?::\d+:|\)[:]?)\s*(?:fatal )?error",
                         re.MULTILINE)


def cache_dir():
    """Where compiled modules are kept: $GPUBLAS_CACHE_DIR, else ~/.cache/gpublas."""
    root = os.environ.get("GPUBLAS_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "gpublas")
    Path(root).mkdir(parents=True, exist_ok=True)
    return Path(root)


def cache_key(*parts):
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode() if isinstance(part, str) else part)
        h.update(b"\0")
    return h.hexdigest()[:32]


def run_compiler(cmd, *, what, output, source_name):
    """Runs `cmd` (which writes `output`); raises CompileError carrying the log on failure."""
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0 or not Path(output).exists():
        log = (proc.stdout + proc.stderr).strip()
        m = _ERROR_LINE.search(log)
        filename, line = (m.group("file"), int(m.group("line"))) if m else (None, None)
        where = f" at {filename}:{line}" if m else ""
        raise CompileError(f"compiling {source_name} for {what} failed{where}; command: {' '.join(cmd)}",
                           log, filename, line)
    return proc.stdout + proc.stderr


def compile_cached(source, *, key_parts, suffix, build, source_name):
    """Returns the path of the cached binary for `source`, building it with
    `build(src_path, out_path)` on a miss. Writes go to a temporary name first, then an atomic
    rename, so concurrent processes never load a half-written file."""
    key = cache_key(source, *key_parts)
    out = cache_dir() / f"{Path(source_name).stem}-{key}{suffix}"
    if out.exists():
        return out
    with tempfile.TemporaryDirectory(prefix="gpublas-") as tmp:
        src = Path(tmp) / (Path(source_name).stem + ".cu")
        src.write_text(source)
        tmp_out = Path(tmp) / ("module" + suffix)
        build(src, tmp_out)
        part = out.with_name(out.name + f".{os.getpid()}.part")
        os.replace(tmp_out, part) if os.stat(tmp).st_dev == os.stat(out.parent).st_dev else \
            part.write_bytes(tmp_out.read_bytes())
        os.replace(part, out)
    return out
