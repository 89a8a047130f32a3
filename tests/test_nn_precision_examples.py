"""The examples' --precision bf16 / fp16 (nn.autocast; fp16 with loss scaling) at fast settings: the
character LSTM's loss falls as it does in FP32, step for step within 16-bit noise."""
import contextlib
import functools
import io

import pytest

from nn.examples import lstm as lstm_example

FAST = ["--steps", "40", "--seq-len", "8", "--batch-size", "8", "--hidden", "16", "--quiet"]


@functools.lru_cache(maxsize=None)
def _losses(precision):
    """(first loss, smoothed last loss) of a fast run, from its summary line."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert lstm_example.main(FAST + ["--precision", precision]) == 0
    last = out.getvalue().splitlines()[-1]   # lstm: loss 3.823 -> 2.581 (chance 3.807) in 40 steps, 2.4 s, bf16
    assert last.startswith("lstm: loss ") and (precision == "fp32") != last.endswith(f", {precision}")
    first, smooth = last.split("loss ")[1].split(" (chance")[0].split(" -> ")
    return float(first), float(smooth)


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_lstm_example_in_16_bits_follows_fp32(precision):
    first32, last32 = _losses("fp32")
    first, last = _losses(precision)
    assert last < first - 1.0                     # it learns (3.82 -> 2.58 in FP32)
    assert abs(first - first32) <= 0.002 and abs(last - last32) <= 0.01   # measured: 0.0003 (bf16), 0.00001 (fp16)
