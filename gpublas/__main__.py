"""python -m gpublas prebuild [--nn] [--dtypes float32,float64] [--root DIR] [--families A,B]: compile every kernel
family for the usual dtypes now, on every core, with a progress bar, so that no program waits for a
compile later (the kernel cache keeps them: $GPUBLAS_CACHE_DIR, else ~/.cache/gpublas).

--nn adds nn's kernels (nn/cuda/, found beside the installed nn package without importing it: gpublas
sits below nn). Exit status 1 when a family fails to compile, each failure named on stderr.
"""
import argparse
import importlib.util
import sys
import time
from pathlib import Path

import numpy as np


def _nn_kernels():
    spec = importlib.util.find_spec("nn")
    folder = Path(spec.origin).parent / "cuda" if spec is not None and spec.origin else None
    if folder is None or not (folder / "conv.cu").is_file():
        raise SystemExit("gpublas prebuild --nn: the nn package (with its nn/cuda/ kernels) is not installed")
    return folder


def prebuild_command(args):
    from tqdm import tqdm

    from . import backend
    from .runtime import launch, source
    roots = [None] + [Path(r) for r in args.root] + ([_nn_kernels()] if args.nn else [])
    dtypes = [np.dtype(d) for d in args.dtypes.split(",")]
    only = args.families.split(",") if args.families else None
    total = sum(len([f for f in source.families(r) if only is None or f in only]) for r in roots) * len(dtypes)
    print(f"gpublas: compiling {total} kernel modules for the {backend()} backend", file=sys.stderr)
    failed, start = [], time.perf_counter()
    with tqdm(total=total, unit="module", file=sys.stderr) as bar:
        def progress(family, dtype, error):
            bar.set_postfix_str(f"{family} {dtype}", refresh=False)
            bar.update()
            if error:
                failed.append(f"{family} ({dtype}): {error}")
        for root in roots:  # per root: a family named with --families lives under one of them
            names = [f for f in source.families(root) if only is None or f in only]
            if names:
                launch.prebuild(roots=[root], dtypes=dtypes, families=names, progress=progress)
    for line in failed:
        print(f"gpublas prebuild: {line}", file=sys.stderr)
    print(f"gpublas: {total - len(failed)} of {total} modules ready in {time.perf_counter() - start:.1f} s",
          file=sys.stderr)
    return 1 if failed else 0


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m gpublas", description="gpublas' command line")
    sub = p.add_subparsers(dest="command", required=True)
    pre = sub.add_parser("prebuild", help=__doc__.splitlines()[0].split(": ", 1)[1])
    pre.add_argument("--nn", action="store_true", help="nn's kernels too (nn/cuda/)")
    pre.add_argument("--dtypes", default="float32,float64", help="comma-separated (default float32,float64)")
    pre.add_argument("--root", action="append", default=[], help="a folder of kernel families of your own")
    pre.add_argument("--families", help="comma-separated: only these families (default: all)")
    args = p.parse_args(argv)
    return prebuild_command(args)


if __name__ == "__main__":
    sys.exit(main())
