"""gpublas benchmarks: `python -m benchmarks [suite ... | all] [--quick] [--sizes ...] [--json F]`.

Every suite checks each result against NumPy before timing it, times with gpublas events (median
and spread of repeated runs after warm-up), prints a table, writes JSON and draws a plot. On the
sim backend the figures are simulated CPU figures and are labelled so.

Suites (`python -m benchmarks` with none lists them, `all` runs every one in this order):
  transfer  H2D/D2H/D2D bandwidth over sizes, pageable vs pinned host memory
  compute   GEMM, GEMV, elementwise and reduction throughput beside NumPy (and cuBLAS on a GPU)
  roofline  the compute kernels on a roofline from the measured peak bandwidth and GEMM rate
  offload   host NumPy vs copy-in + compute + copy-out on the device; the crossover size
  overlap   chunked copy/compute/copy pipeline over 1-8 streams vs the sequential version
  launch    Python-side cost of one small kernel launch
  train     time per training step of nn's digits CNN and an LSTM vs a NumPy step
  scaling   the digits CNN data-parallel on 1 and N MPI ranks (run under mpiexec -n N)
  gemm      the GEMM v2 kernels (FP32, split-K, TF32) against cuBLAS, in % of cuBLAS
  sass      registers, spills, occupancy and SASS instruction mix of every kernel (nvcc + cuobjdump)
  attention fused attention forward + backward against the unfused path and torch SDPA, over T
  layernorm LayerNorm forward + backward GB/s against the device-to-device copy's (and NumPy, torch)
  sort      sort / argsort / topk keys per second against NumPy (and CuPy / torch.sort on a GPU)
  gpt2      GPT-2 small training tokens/s, eager and --graph, against PyTorch
  generate  GPT generation tokens/s with and without the key/value cache, over the context

And one command that is not a suite: `python -m benchmarks profile [--top N] -- CMD ...` runs CMD
with the gpublas profiler on and prints its kernels and transfers by total time.
"""
from .suites import SUITES  # noqa: F401 (benchmarks.SUITES)


def main(argv=None):
    """Runs the command line `argv` (default sys.argv[1:]); returns the exit status."""
    from .cli import main as _main
    return _main(argv)
