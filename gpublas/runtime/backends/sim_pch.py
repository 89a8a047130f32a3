"""A precompiled header of the simulator's headers (gpublas_sim.h and what it includes), for the sim
backend's module builds: g++ reads them in about a second of every module's compile, the same second
each time.

The header is built once per compiler, flags, CPU and header text, and kept in the kernel cache as
`gpublas_sim-<key>.h.gch` through compiler.compile_cached, so it has the modules' guarantees: a
checksum record beside it (a damaged one is rebuilt with one warning line, an unrecorded one quietly),
atomic replacement (concurrent processes), a cache directory deleted under it (recreated). A stale one
cannot be found: everything it depends on is in its key. Beside it sits `gpublas_sim-<key>.h`, one line
including gpublas_sim.h: g++ -include's that file, takes the .gch beside it when valid, and otherwise
reads the headers as before, so a missing or refused .gch costs time, never correctness (the code
generated is the same either way: checked in tests/test_sim_pch.py).

Building it costs 1.1-1.2 s of CPU (a 45 MB file; 2.3 s and 69 MB while the module side of the headers
included libstdc++'s containers, strings and mutex: buffer.h) and saves 0.4-0.8 s of every module's: the first module a
process compiles starts the build on a thread of its own; a module a launch waits for compiles beside
it, without it; a module of a background batch (nn.prefetch, prebuild: compile_queue's threads) and
every module after the first wait for it (on a 2-core machine compiling beside the build slowed both:
the header came too late for most of the first run's modules). A process that finds the header in the
cache already (another built it: a test suite's workers and subprocesses, MPI ranks, a second run) uses
it from its first module on. GPUBLAS_SIM_PCH=0 turns it off.
"""
import os
import sys
import threading
import uuid
from pathlib import Path

from .. import compile_queue, compiler, config

_lock = threading.Lock()
_ready = {}      # (cache dir, key) -> the stub header to -include, once its .gch is built and checked in this process
_building = {}   # (cache dir, key) -> the thread building it
WAIT_S = 60      # the longest a module build waits for the header's (then it reads the headers itself)
_checked = {}    # .gch path -> (size, mtime) when its checksum last matched (a 45 MB file: hashed once)


def include(cxx, flags, key_parts, header):
    """The header to pass to -include for a module build: the cached precompiled one's stub when it
    is built and intact (waiting up to WAIT_S for a build under way), else `header` itself, and then a
    build of the precompiled one starts in the background. `flags`: the module flags, no -D defines."""
    if not config.flag("GPUBLAS_SIM_PCH", True):
        return header
    key = (str(compiler.cache_dir()), compiler.cache_key(*key_parts))  # a process may switch caches
    with _lock:
        stub = _ready.get(key)
    if stub is not None and _intact(stub):  # a damaged one is forgotten here and built again below
        return stub
    with _lock:
        builder = _building.get(key)
        first = builder is None
        if first:
            _building[key] = builder = threading.Thread(target=_build, args=(key, cxx, flags, key_parts, header),
                                                        name="gpublas-sim-pch")
            builder.start()
    if first and not compile_queue.in_worker() and not _in_cache(key_parts, header):
        return header  # a launch waits for this module: compiled beside the build
    builder.join(WAIT_S)  # later modules, and a background batch's first (prefetch): it saves more than it costs
    with _lock:
        stub = _ready.get(key)
    return stub if stub is not None and _intact(stub) else header


def _in_cache(key_parts, header):
    """Whether the cache holds the header and its stub intact already (another process built them): the
    builder then only checks them, in a fraction of a module's compile, and this process's first module
    waits for that. A damaged one is rebuilt as when there is none (its first module does not wait)."""
    gch = compiler.cache_dir() / compiler.cached_name(_pch_source(header), key_parts=key_parts, suffix=".h.gch",
                                                      source_name=header.name)
    try:
        return gch.with_suffix("").read_text() == _stub_text(gch) and compiler.check_cached(gch) is None
    except OSError:
        return False


def _pch_source(header):
    return f'#include "{header.name}"\n'


def wait():
    """Waits for the background builds started so far (tests, prebuild)."""
    for t in list(_building.values()):
        t.join()


def _intact(stub):
    """Whether the .gch beside `stub` still matches its checksum record (hashed again only when its
    size or time changed); a damaged or deleted one is forgotten, so that the next module rebuilds it."""
    gch = Path(str(stub) + ".gch")
    try:
        st = gch.stat()
        seen = (st.st_size, st.st_mtime_ns) if stub.read_text() == _stub_text(gch) else None
    except OSError:
        seen = None
    if seen is not None and _checked.get(gch) == seen:
        return True
    if seen is not None and compiler.check_cached(gch) is None:
        _checked[gch] = seen
        return True
    with _lock:
        for key, s in list(_ready.items()):
            if s == stub:
                _ready.pop(key)
                _building.pop(key, None)
    return False


def _stub_text(gch):
    return f'#include "gpublas_sim.h"  // {gch.name} precompiles this\n'


def _build(key, cxx, flags, key_parts, header):
    """Builds (or finds) the precompiled header and its stub; records the stub in _ready. A failure
    is said in one line: modules go on compiling without it."""
    def build(src, out):
        compiler.run_compiler([cxx, *flags, "-I", str(header.parent), "-x", "c++-header", str(src), "-o", str(out)],
                              what="the sim backend's precompiled header", output=out, source_name=header.name)
    try:
        gch = compiler.compile_cached(_pch_source(header), key_parts=key_parts, suffix=".h.gch",
                                      build=build, source_name=header.name)
        stub = gch.with_suffix("")  # gpublas_sim-<key>.h
        text = _stub_text(gch)
        if not stub.is_file() or stub.read_text() != text:
            part = stub.with_name(f"{stub.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.part")
            part.write_text(text)
            os.replace(part, stub)
        _checked[gch] = (gch.stat().st_size, gch.stat().st_mtime_ns)
    except Exception as e:  # noqa: BLE001 - the modules do not need it
        print(f"gpublas: the sim's precompiled header could not be built ({type(e).__name__}: "
              f"{str(e).splitlines()[0] if str(e) else ''}); compiling without it", file=sys.stderr)
        return
    with _lock:
        _ready[key] = stub
