"""The command line: choose suites, run each, print its table, write its JSON and plot.

Output files: --json/--plot name them for a single suite (with several suites the JSON holds all of
them under "suites" and each plot gets "-<suite>" before its extension); --out DIR writes
DIR/<suite>-<device>-<date>.json and .png for every suite run.
"""
import argparse
import importlib
import os
import sys
import time
import traceback
from pathlib import Path

import gpublas

from .suites import SUITES
from .harness import Context, banner, device_slug, save_plot, table, today, write_json


def parser():
    p = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="gpublas benchmarks: each result is checked against NumPy, then timed with events.")
    p.add_argument("suites", nargs="*", metavar="suite",
                   help=f"which suites to run, or 'all' (none: list them): {', '.join(SUITES)}")
    p.add_argument("--quick", action="store_true",
                   help="small sweeps, few repeats (well under a minute on the simulator)")
    p.add_argument("--sizes", nargs="+", default=(), metavar="SIZE",
                   help="override the sweep: transfer: bytes (4K 16M 1G); compute/roofline: N or MxNxK; "
                        "offload: n (GEMM n x n x n, elementwise n*n); overlap: elements; "
                        "launch: launches per sample; train: batch sizes")
    p.add_argument("--json", metavar="FILE", help="write the results as JSON")
    p.add_argument("--plot", metavar="FILE", help="draw a plot (PNG; needs matplotlib, the 'bench' extra)")
    p.add_argument("--out", metavar="DIR", help="write <suite>-<device>-<date>.json and .png into DIR")
    p.add_argument("--repeats", type=int, default=0, help="timed samples per measurement (default 10, quick 3)")
    p.add_argument("--backend", choices=("sim", "cuda"), help="backend (default: GPUBLAS_BACKEND or autodetect)")
    p.add_argument("--no-progress", action="store_true", help="no tqdm progress bars")
    p.add_argument("--arch", default="sm_90", help="sass: the GPU architecture to compile for (default sm_90)")
    p.add_argument("--graph", action="store_true",
                   help="train: also time each step captured once and replayed (gpublas.graph): STEP graph rows")
    p.add_argument("--precision", choices=("fp32", "bf16", "fp16"), default="fp32",
                   help="train: bf16 / fp16 also time each step under nn.autocast of that dtype (fp16 with "
                        "loss scaling), PyTorch's peer under torch.autocast: STEP bf16 / STEP fp16 rows")
    return p


def _suffixed(path, suite, many):
    path = Path(path)
    return path.with_name(f"{path.stem}-{suite}{path.suffix}") if many else path


def run_suite(name, ctx, args, many):
    """Runs one suite; returns its JSON document (with 'error' set when it raised)."""
    module = importlib.import_module(f"benchmarks.{name}")
    print(f"\n== {name}: {module.DESCRIPTION} ==")
    t0 = time.perf_counter()
    try:
        report = module.run(ctx)
    except Exception as e:  # one broken suite must not hide the others' results
        traceback.print_exc()
        from .harness import Report
        report = Report(name, ctx)
        report.checks.append({"name": "suite ran", "passed": False})
        report.summary["error"] = f"{type(e).__name__}: {e}"
    elapsed = time.perf_counter() - t0
    if report.rows and report.columns:
        print(table(report.columns, report.table_rows or report.rows))
    for n in report.notes:
        print(f"  note: {n}")
    failed = [c["name"] for c in report.checks if not c["passed"]]
    print(f"  checks: {len(report.checks) - len(failed)} of {len(report.checks)} passed"
          + (f"; FAILED: {', '.join(failed)}" if failed else "") + f"  ({elapsed:.1f} s)")
    doc = report.to_json()
    doc["elapsed_s"] = round(elapsed, 3)
    stem = f"{name}-{device_slug()}-{today()}"
    plots = [_suffixed(args.plot, name, many)] if args.plot else []
    if args.out:
        plots.append(Path(args.out) / f"{stem}.png")
    for p in plots:
        if report.rows and hasattr(module, "draw"):
            try:
                saved = save_plot(report, module.draw, p)
                # beside the JSON (--out): its file name, so the JSON names no path of this machine
                doc["plot"] = Path(saved).name if saved and args.out and Path(p).parent == Path(args.out) else saved
            except Exception as e:  # a plot is a picture of the results, never a reason to lose them
                print(f"plot failed: {type(e).__name__}: {e}")
                doc["plot_error"] = f"{type(e).__name__}: {e}"
    if args.out:
        write_json(doc, Path(args.out) / f"{stem}.json")
        print(f"results written to {Path(args.out) / (stem + '.json')}")
    return doc


def list_suites():
    """What `python -m benchmarks` with no suite prints: each suite with its one-line description."""
    lines = ["suites (python -m benchmarks SUITE [SUITE ...] [--quick], or 'all' for every one):"]
    for name in SUITES:
        lines.append(f"  {name:9s} {importlib.import_module(f'benchmarks.{name}').DESCRIPTION}")
    lines.append("  profile   python -m benchmarks profile -- CMD: run CMD under gpublas.profile(), print its table")
    return "\n".join(lines)


def mpi_rank():
    """This process's rank when an MPI launcher started it (from its environment), else 0."""
    for var in ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"):
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var])
    return 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["profile"]:  # a command, not a suite: `profile -- CMD` runs CMD under the profiler
        from .profile import main as profile_main
        return profile_main(argv[1:])
    args = parser().parse_args(argv)
    if not args.suites:  # running every suite takes long (and `scaling` wants mpiexec): say what there is
        print(list_suites())
        return 0
    if mpi_rank() > 0:  # under mpiexec (the scaling suite) rank 0 prints and writes the files
        sys.stdout = open(os.devnull, "w")
        args.json = args.plot = args.out = None
    if args.suites == ["all"]:
        args.suites = list(SUITES)
    unknown = [s for s in args.suites if s not in SUITES]
    if unknown:
        parser().error(f"unknown suite(s) {', '.join(unknown)}; choose from {', '.join(SUITES)}")
    if args.backend:
        gpublas.use(args.backend)
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
    ctx = Context(quick=args.quick, sizes=tuple(args.sizes), repeats=args.repeats,
                  progress=not args.no_progress, arch=args.arch, graph=args.graph,
                  precision=args.precision)
    print(banner(ctx))
    suites = args.suites
    many = len(suites) > 1
    docs = {name: run_suite(name, ctx, args, many) for name in suites}
    ok = all(d["checks_passed"] for d in docs.values())
    if args.json:
        if many:
            first = next(iter(docs.values()))
            combined = {k: first[k] for k in ("date", "backend", "device", "simulated", "label", "versions")}
            combined.update(checks_passed=ok, suites=docs)
            write_json(combined, args.json)
        else:
            write_json(docs[suites[0]], args.json)
        print(f"\nJSON written to {args.json}")
    if many:
        print("\nsummary:")
        for name, d in docs.items():
            state = "error" if "error" in d["summary"] else ("ok" if d["checks_passed"] else "CHECKS FAILED")
            print(f"  {name:9s} {state:13s} {len(d['results']):3d} rows  {len(d['skipped'])} skipped  "
                  f"{d['elapsed_s']:7.1f} s")
    return 0 if ok else 1
