"""profile: run a command with the gpublas profiler on and show where its time went.

    python -m benchmarks profile [--top N] [--by-name] [--json FILE] -- python -m nn.examples.digits --epochs 2

The command runs in a child process with GPUBLAS_PROFILE pointing at a temporary JSON file (see
gpublas/runtime/profiler.py); its own output passes through unchanged. Then the table: launches per kernel
name and launch shape, and transfers, sorted by total time, with the command's wall time beside
them. The exit status is the command's.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gpublas.runtime.profiler import Profile

DESCRIPTION = "run a command with the kernel profiler on; print its kernels and transfers by total time"


def parser():
    p = argparse.ArgumentParser(prog="python -m benchmarks profile", description=DESCRIPTION)
    p.add_argument("--top", type=int, default=30, help="rows to print (default 30)")
    p.add_argument("--by-name", action="store_true", help="one row per kernel name (all launch shapes together)")
    p.add_argument("--json", metavar="FILE", help="also write the profile as JSON")
    p.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    return p


def main(argv):
    args = parser().parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser().error("no command to profile: python -m benchmarks profile -- CMD [ARGS...]")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "profile.json"
        env = {**os.environ, "GPUBLAS_PROFILE": str(out)}
        t0 = time.perf_counter()
        try:
            status = subprocess.call(command, env=env)
        except OSError as e:
            print(f"profile: cannot run {command[0]!r}: {e}", file=sys.stderr)
            return 127
        elapsed = time.perf_counter() - t0
        if not out.exists():
            print(f"profile: the command wrote no profile (exit status {status}); "
                  "does it import gpublas?", file=sys.stderr)
            return status or 1
        text = out.read_text()
    prof = Profile.from_json(text)
    print(f"\n== profile: {' '.join(command)} ==  ({elapsed:.2f} s including start-up, exit status {status})")
    print(prof.table(top=args.top, group_by_shape=not args.by_name))
    if args.json:
        Path(args.json).write_text(text)
        print(f"JSON written to {args.json}")
    return status
