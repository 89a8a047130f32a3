"""Compiles the kernel modules a GPU run will load, ahead, with nvcc, into a folder the cuda backend
reads first (GPUBLAS_CUBIN_DIR): gpublas/runtime/cubins.py says how they are recorded, keyed and loaded."""
import argparse
import json
import sys
from pathlib import Path

from gpublas.runtime import cubins


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks.build_cubins", description=__doc__)
    p.add_argument("records", nargs="*", help="files written under GPUBLAS_RECORD_MODULES")
    p.add_argument("--arch", default="sm_90a", help="nvcc target (default sm_90a: an H100 or H200)")
    p.add_argument("--out", required=True, help="the folder to fill (GPUBLAS_CUBIN_DIR on the GPU machine)")
    p.add_argument("--families", nargs="*", metavar="DTYPE", default=None,
                   help="also every family of cuda_src/ and nn/cuda/ for these dtypes (none named: float32 float64)")
    p.add_argument("--workers", type=int, default=None)
    args = p.parse_args(argv)
    modules = cubins.recorded(args.records)
    if args.families is not None:
        roots = [None] + ([cubins.PROJECT / "nn" / "cuda"] if (cubins.PROJECT / "nn" / "cuda").is_dir() else [])
        modules += cubins.family_modules(roots, args.families or ("float32", "float64"))
    modules = list({(t, json.dumps(d, sort_keys=True), n): (t, d, n) for t, d, n in modules}.values())
    results = cubins.build(modules, args.arch, args.out, args.workers)
    failed = [(n, e) for n, e in results if e]
    size = sum(f.stat().st_size for f in Path(args.out).glob("*.cubin"))
    print(f"{len(results) - len(failed)} of {len(results)} modules in {args.out} ({size / 2**20:.1f} MiB)")
    for name, error in failed:
        print(f"  FAILED {name}: {error}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
