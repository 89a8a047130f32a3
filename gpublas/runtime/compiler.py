"""One compile path for both backends: CUDA C source -> a loadable binary, cached on disk.

The cache key covers the source, every header in cuda_src/ and the simulation header, the defines,
the backend's compiler command and its version (as PyCUDA's compiler.py does). A failed compile
raises CompileError with the compiler's log and the first file:line it names.

Cache integrity: each module is written under a temporary name inside the cache directory itself
and os.replace'd into place (one filesystem by construction, so bind mounts and other devices never
matter), beside a `.sha256` record of its size and checksum written first. A module whose record
does not match (truncated, empty, garbage) is rebuilt with one warning line instead of being loaded
(a truncated shared library would crash the process); one with no record (an older gpublas wrote it)
is rebuilt quietly. A cache directory deleted while a module compiles is recreated and the module
compiled again, said in one line on stderr (not the compiler's error about its vanished files). A
cache directory that cannot be written is left alone: modules are built into a private temporary
directory for this process instead, said once on stderr.

One build per module at a time: a miss takes `<name>.lock` in the cache directory (flock, where the OS
has it) and looks again once it holds it, so processes that want the same module at once (pytest's
workers, MPI ranks, nn.prefetch beside a launch) compile it once and the others load it; the lock file
is removed by its holder (a waiter that finds its file unlinked opens the new one).
"""
import atexit
import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import uuid
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows: no lock; concurrent builds of one module stay correct (atomic replace), only slower
    fcntl = None

from .errors import CompileError, GpublasError

_ERROR_LINE = re.compile(r"^(?P<file>[^\s:][^:\n]*?)[:(](?P<line>\d+)(?::\d+:|\)[:]?)\s*(?:fatal )?error",
                         re.MULTILINE)
_private = None  # the private directory used when the cache cannot be written (made once)
_private_lock = threading.Lock()


def cache_dir():
    """Where compiled modules are kept: $GPUBLAS_CACHE_DIR, else ~/.cache/gpublas."""
    return Path(os.environ.get("GPUBLAS_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "gpublas"))


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


def _record(path):
    return path.with_name(path.name + ".sha256")


def _fingerprint(data):
    return f"{len(data)} {hashlib.sha256(data).hexdigest()}\n"


def check_cached(path):
    """None when the cached module at `path` matches its size and checksum record; else why not
    ('missing', 'unrecorded', or what is wrong with it)."""
    try:
        data = path.read_bytes()
    except OSError:  # absent, or the cache directory is not one
        return "missing"
    try:
        recorded = _record(path).read_text()
    except OSError:
        return "unrecorded"
    if recorded == _fingerprint(data):
        return None
    size = recorded.split()[0] if recorded.split() else "?"
    return f"{len(data)} bytes where {size} were written" if str(len(data)) != size else "corrupted (checksum differs)"


def cached_name(source, *, key_parts, suffix, source_name):
    """The file name compile_cached keeps `source`'s binary under."""
    return f"{Path(source_name).stem}-{cache_key(source, *key_parts)}{suffix}"


def compile_cached(source, *, key_parts, suffix, build, source_name):
    """Returns the path of the cached binary for `source`, building it with
    `build(src_path, out_path)` on a miss or when the cached one fails its check."""
    name = cached_name(source, key_parts=key_parts, suffix=suffix, source_name=source_name)
    for root in (cache_dir(), _private):
        if root is None:
            continue
        out = root / name
        problem = check_cached(out)
        if problem is None:
            return out
        if problem not in ("missing", "unrecorded"):
            print(f"gpublas: cached module {out} is {problem}; rebuilding it", file=sys.stderr)
    root = cache_dir()
    with build_lock(root, name):
        if check_cached(root / name) is None:  # another process built it while this one waited
            return root / name
        try:
            return _build_into(root, name, source, build)
        except _Unwritable as e:
            return _build_into(_private_dir(e), name, source, build)


@contextlib.contextmanager
def build_lock(root, name):
    """Holds `<name>.lock` in directory `root` (made if missing) while the body runs: one build of `name`
    at a time across processes and threads. No lock where the OS has no flock or `root` cannot be written
    (the body runs unlocked: builds stay atomic, a module may then be compiled twice)."""
    fd = _lock_fd(root / f"{name}.lock")
    try:
        yield
    finally:
        if fd is not None:
            Path(root / f"{name}.lock").unlink(missing_ok=True)  # before unlocking: a waiter then sees it unlinked
            os.close(fd)


def _lock_fd(path):
    """An open descriptor of `path` holding its exclusive flock, or None when it cannot be had."""
    if fcntl is None:
        return None
    while True:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:  # a filesystem without locks: build unlocked
            os.close(fd)
            return None
        try:
            if os.fstat(fd).st_ino == os.stat(path).st_ino:
                return fd
        except OSError:  # unlinked by the holder this one waited for: take the next file
            pass
        os.close(fd)


class _Unwritable(OSError):
    pass


class _Vanished(Exception):
    pass


def _build_into(root, name, source, build):
    """Builds `name` in directory `root` (_build_once). When the directory, or the source written into
    it, disappears while the compiler runs (another process cleared the cache), the compiler's error
    is not the problem: says so in one line, recreates the directory and builds once more; a second
    disappearance raises GpublasError in one line."""
    try:
        return _build_once(root, name, source, build)
    except _Vanished:
        print(f"gpublas: the kernel cache directory {root} vanished while {name} was compiling; "
              "recreating it and compiling again", file=sys.stderr)
    try:
        return _build_once(root, name, source, build)
    except _Vanished:
        raise GpublasError(f"the kernel cache directory {root} vanished twice while {name} was compiling "
                           "(is something deleting it? set GPUBLAS_CACHE_DIR to another directory)") from None


def _build_once(root, name, source, build):
    """Builds `name` in directory `root`: source and output under unique temporary names there,
    the record, then an atomic os.replace, so concurrent processes never load a half-written file.
    Raises _Vanished when the build fails and its source file is gone."""
    tag = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
    stem, suffix = name[:-len(Path(name).suffix)], Path(name).suffix
    src, part = root / f"{stem}.{tag}.cu", root / f"{stem}.{tag}.part{suffix}"
    out = root / name
    try:
        root.mkdir(parents=True, exist_ok=True)
        src.write_text(source)
    except OSError as e:
        raise _Unwritable(f"{root}: {e.strerror or e}") from e
    try:
        build(src, part)
        record = root / f"{stem}.{tag}.sha256"
        record.write_text(_fingerprint(part.read_bytes()))
        os.replace(record, _record(out))
        os.replace(part, out)
    except (CompileError, OSError) as e:
        if not src.exists():
            raise _Vanished(root) from e
        raise
    finally:
        for p in (src, part, root / f"{stem}.{tag}.sha256"):
            p.unlink(missing_ok=True)
    return out


def memo_load(name):
    """The JSON object a build stored under `name` in the cache (memo_store), or None when there is
    none or it cannot be read or parsed (a memo is only ever a shortcut: the caller recomputes)."""
    for root in (cache_dir(), _private):
        if root is None:
            continue
        try:
            return json.loads((root / name).read_text())
        except (OSError, ValueError):
            continue
    return None


def memo_store(name, data):
    """Stores the JSON-able `data` under `name` in the cache: written under a temporary name and
    os.replace'd, so a reader sees the old memo or the new one, never half of one. A cache that
    cannot be written keeps no memo (nothing else changes)."""
    root = _private or cache_dir()
    part = root / f"{name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.part"
    try:
        part.write_text(json.dumps(data))
        os.replace(part, root / name)
    except OSError:
        part.unlink(missing_ok=True)


def _private_dir(reason):
    """This process's private module directory, made (and announced) once."""
    global _private
    with _private_lock:
        if _private is None:
            _private = Path(tempfile.mkdtemp(prefix="gpublas-modules-"))
            atexit.register(shutil.rmtree, _private, True)
            print(f"gpublas: the kernel cache cannot be written ({reason}); compiling into {_private} for this "
                  "process (set GPUBLAS_CACHE_DIR to a writable directory to keep modules)", file=sys.stderr)
    return _private
