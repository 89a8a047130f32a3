"""The sim backend's compile step: a .cu file -> a shared library for the host, cached on disk.

The front end (sim_cparse.translate, sim_fission.transform: which kernels reach a barrier, their
blocks rewritten as loops over threads) is Python and costs 20-70 ms a module even when the library
is already cached; its outputs (the library's path, the barrier kernels, the fission report) are kept
beside the library in a small JSON memo keyed by everything the front end reads: the source, the
defines, both header digests, the compiler and its flags, the CPU, and the front end's own code. A
process that finds the memo and the library intact loads the library without running the front end
(lstm example: 250 ms of its 1.9 s start-up and first step). A memo that is missing, unreadable or names
a library that fails its check is ignored: the front end runs as before (and writes a fresh memo).

A library may hold a unit of the family's kernels instead of all of them (build_module's `kernels`:
source.sim_units): the source is the same, only the unit's entry points are appended, and since the
dialect makes every kernel `inline` (dialect.h) g++ optimizes and emits only the kernels those entries
reach (gemm.cu's gemm_direct and gemm_naive: 2.0 s of CPU against 5.7 s for the whole family). Each
unit is a library of its own in the cache, with its own memo; the front end runs once per family
and process (_front_end_once).
"""
import functools
import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

from .. import compiler, config, source
from ..errors import CompileError
from . import sim_fission, sim_pch
from .sim_analysis import kernels_needing_fibers, taken_branches
from .sim_cparse import translate

HEADER = Path(__file__).resolve().parent.parent / "sim" / "gpublas_sim.h"

# -O3 -march=native: measured against -O2 and against -march=x86-64-v2/v3 in docs/sim-backend.md
# ("Host compiler flags"); the compile cache key names the CPU (_cpu_id), so a cache copied to another
# CPU is rebuilt. -ffp-contract=off: a * b + c rounds the same in every build of a kernel (fused or
# not was the optimizer's choice, and fission and fibers differed at -O3).
_CXXFLAGS = ["-O3", "-ffp-contract=off", "-std=c++17", "-fPIC", "-shared", "-fopenmp", "-fvisibility=hidden",
             "-U_FORTIFY_SOURCE", "-D_FORTIFY_SOURCE=0", "-fno-strict-aliasing", "-Wno-unknown-pragmas",
             "-Wno-unused-result"]


def headers_digest():
    """One digest of every simulator header (gpublas_sim.h includes the others): a change to any
    of them rebuilds every cached module."""
    return compiler.cache_key(*(f"{p.name}\0{p.read_text()}" for p in sorted(HEADER.parent.glob("*.h"))))


@functools.lru_cache(maxsize=None)
def host_compiler():
    """(command, version line) of the host C++ compiler: $CXX, else g++, else clang++."""
    for cand in [config.executable("CXX"), "g++", "clang++", "c++"]:
        if cand and shutil.which(cand):
            out = subprocess.run([cand, "--version"], capture_output=True, text=True).stdout
            return cand, out.splitlines()[0] if out else cand
    raise CompileError("the sim backend needs a C++ compiler (g++ or clang++) on the PATH, or $CXX",
                       "no compiler found")


def _cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@functools.lru_cache(maxsize=None)
def _cpu_id(cpuinfo="/proc/cpuinfo"):
    """The CPU as -march=native sees it, for the compile cache key: model name, family, model and
    stepping, and a digest of the feature flags (a VM may report only "AMD EPYC" for CPUs of different
    instruction sets)."""
    fields = {}
    try:
        with open(cpuinfo) as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key in ("cpu family", "model", "stepping", "flags") and key not in fields:
                    fields[key] = value.strip()
    except OSError:
        pass
    flags = compiler.cache_key(fields.pop("flags", ""))[:16]
    return " ".join([_cpu_name(), *(f"{k} {v}" for k, v in sorted(fields.items())), f"flags {flags}",
                     platform.machine()])


def _machine_flags():
    if platform.machine() in ("x86_64", "AMD64"):
        # TLS descriptors: threadIdx, blockIdx and __shared__ (thread_local in a dlopened
        # module) are re-read after every barrier; gnu2 makes that a short call instead of
        # __tls_get_addr (tiled GEMM 256^3: 59 -> 52.5 ms of CPU).
        return ["-march=native", "-mtls-dialect=gnu2"]
    return []


RUNTIME = HEADER.with_name("runtime.cpp")


def runtime_library():
    """The path of the runtime library (sim/runtime.cpp), built once per compiler, flags, CPU and
    header text and cached like a module (its checksum record, damage and concurrency rules)."""
    return build_host(RUNTIME.read_text(), RUNTIME.name)


def build_host(text, source_name):
    """The path of a C++ source of the simulator's own (sim/graph_replay.cpp: no kernels, no
    force-included dialect) built with the kernels' flags, cached on disk."""
    cxx, version = host_compiler()
    flags = _CXXFLAGS + _machine_flags()

    def build(src, out):
        compiler.run_compiler([cxx, *flags, "-I", str(HEADER.parent), "-x", "c++", str(src), "-o", str(out)],
                              what="the sim backend", output=out, source_name=source_name)
    return compiler.compile_cached(text, key_parts=[headers_digest(), " ".join(flags), version, _cpu_id()],
                                   suffix=".so", build=build, source_name=source_name)


@functools.lru_cache(maxsize=None)
def _front_end_digest():
    """A digest of the Python that turns a .cu into the library's source (this module, the
    translator, the fission rewrite and its regions, source.py's include and macro handling)."""
    here = Path(__file__).resolve().parent
    files = [here / f for f in ("sim_build.py", "sim_cparse.py", "sim_fission.py", "sim_regions.py")]
    return compiler.cache_key(*(p.read_bytes() for p in files), Path(source.__file__).read_bytes())


def build_module(text, defines, source_name, kernels=None):
    """(library path, barrier kernels, fission report) for the kernels of `text` (`kernels`: only
    those, a unit of source.sim_units; None: all): from the front-end memo when it and its library are
    intact, else by running the front end and the compiler."""
    cxx, version = host_compiler()
    flags = module_flags(defines)
    key = [headers_digest(), source.headers_digest(), " ".join(flags), version, _cpu_id()]
    unit = "" if kernels is None else " ".join(sorted(kernels))
    memo = f"{Path(source_name).stem}-{compiler.cache_key(text, _front_end_digest(), *key, unit)}.front.json"
    dumping = bool(os.environ.get("GPUBLAS_SIM_FISSION_DUMP"))
    found = None if dumping else _read_memo(memo)
    if found is not None:
        return found
    path, barrier, report = _front_end_and_build(text, defines, source_name, cxx, flags, key, kernels)
    compiler.memo_store(memo, {"library": str(path), "barrier": sorted(barrier), "report": report})
    return path, barrier, report


def _read_memo(name):
    data = compiler.memo_load(name)
    try:
        path, barrier, report = Path(data["library"]), set(data["barrier"]), dict(data["report"])
        if not all(isinstance(k, str) and (v is None or isinstance(v, str)) for k, v in report.items()):
            return None
    except (KeyError, TypeError, ValueError):
        return None
    return (path, barrier, report) if compiler.check_cached(path) is None else None


def front_end(text, defines, source_name, kernels=None):
    """The front end alone: (barrier kernels, fission report, {"plain": source, "fissioned": source}),
    each source as the compiler gets it (the entry points of `kernels`, None: of every kernel,
    appended); "plain" keeps every barrier kernel on fibers, the fallback when "fissioned" does not
    compile."""
    sigs, barrier, plain, fissioned, report = _front_end_once(text, tuple(sorted((defines or {}).items())),
                                                              source_name)
    entries = [k for k in sigs if kernels is None or k in kernels]

    def body(src, report):
        return (f'#line 1 "{source_name}"\n' + src + '\n#line 1 "<gpublas sim entries>"\n'
                + "".join(f"GPUBLAS_SIM_{'FISSION_' if report.get(k, 1) is None else ''}ENTRY({k})\n"
                          for k in entries))

    return set(barrier), dict(report), {"plain": body(plain, {}), "fissioned": body(fissioned, report)}


@functools.lru_cache(maxsize=16)
def _front_end_once(text, defines, source_name):
    """(signatures, barrier kernels, plain source, fissioned source, report) of a family: the units of
    one family share them. defines: sorted (name, value) pairs."""
    sigs = source.kernel_signatures(text, dict(defines))
    full, names = source.with_includes(text), {k for k, _ in defines}
    barrier = kernels_needing_fibers(full, names)
    plain = source.strip_comments(translate(text))
    # the __device__ functions the rewrite inlines: those of the build's #if branches (one of sort.cu's two warp_match)
    fissioned, report = sim_fission.transform(plain, list(sigs), barrier,
                                              taken_branches(source.strip_comments(full), names), source_name)
    return sigs, frozenset(barrier), plain, fissioned, report


def module_flags(defines):
    return _CXXFLAGS + [f"-D{k}={v}" for k, v in sorted((defines or {}).items())] + _machine_flags()


def compile_command(cxx, flags, head=HEADER):
    """The host compiler's command line for a module's source, less the source and output files; `head`
    is the header force-included (gpublas_sim.h, or the precompiled one's stub)."""
    return [cxx, *flags, *(["-Winvalid-pch"] if head != HEADER else []), "-I", str(source.src_dir()),
            "-I", str(HEADER.parent), "-include", str(head), "-x", "c++"]


def _front_end_and_build(text, defines, source_name, cxx, flags, key, kernels):
    barrier, report, bodies = front_end(text, defines, source_name, kernels)

    def build(src, out):
        head = _force_include(cxx, key)
        log = compiler.run_compiler(compile_command(cxx, flags, head) + [str(src), "-o", str(out)],
                                    what="the sim backend", output=out, source_name=source_name)
        if head != HEADER and "precompiled header" in log and not _refused:
            _refused.append(log)
            print(f"gpublas: g++ did not use the sim's precompiled header {head}.gch (compiles are slower): "
                  f"{log.strip().splitlines()[-1]}", file=sys.stderr)

    _dump(source_name, bodies["fissioned"], report)
    try:
        path = compiler.compile_cached(bodies["fissioned"], key_parts=key, suffix=".so", build=build,
                                       source_name=source_name)
    except CompileError as e:
        if not any(r is None for r in report.values()):
            raise
        # the rewrite produced code the compiler refuses: the kernels keep their fibers
        # (tests/test_sim_fission.py compiles every family's rewrite for every dtype, so this is a bug)
        print(f"gpublas: the sim's loop fission of {source_name} does not compile ({e.filename}:{e.line}); "
              "running its barrier kernels on fibers", file=sys.stderr)
        report = {k: f"the rewritten source did not compile: {e}" for k in report}
        path = compiler.compile_cached(bodies["plain"], key_parts=key, suffix=".so", build=build,
                                       source_name=source_name)
    return path, barrier, report


_refused = []  # g++'s complaint about the precompiled header, said once


def _force_include(cxx, key):
    """The simulator header a module build force-includes: the precompiled one's stub when it is
    ready (sim_pch), else gpublas_sim.h. key: the module key's parts whose defines are left out."""
    base = _CXXFLAGS + _machine_flags()
    return sim_pch.include(cxx, base, [key[0], " ".join(base), *key[3:]], HEADER)


def _dump(source_name, text, report):
    """GPUBLAS_SIM_FISSION_DUMP=DIR: the source as compiled (with the fissioned block functions) and,
    per barrier kernel, whether it was rewritten or why not."""
    where = os.environ.get("GPUBLAS_SIM_FISSION_DUMP")
    if not where:
        return
    stem = Path(where) / Path(source_name).name
    stem.parent.mkdir(parents=True, exist_ok=True)
    stem.with_name(stem.name + ".fission.cu").write_text(text)
    stem.with_name(stem.name + ".fission.txt").write_text(
        "".join(f"{k}: {'fissioned' if r is None else 'fibers: ' + r}\n" for k, r in sorted(report.items())))
