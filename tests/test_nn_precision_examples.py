"""The examples' --precision bf16 / fp16 (nn.autocast; fp16 with loss scaling) at fast settings: the
character LSTM's loss falls as it does in FP32, step for step within 16-bit noise."""
import pytest

from nn.examples import lstm as lstm_example

FAST = ["--steps", "40", "--seq-len", "8", "--batch-size", "8", "--hidden", "16", "--quiet"]


def _losses(capsys, precision):
    assert lstm_example.main(FAST + ["--precision", precision]) == 0
    last = capsys.readouterr().out.splitlines()[-1]   # lstm: loss 3.823 -> 2.581 (chance 3.807) in 40 steps, ...
    assert last.startswith("lstm: loss ") and (precision == "fp32") != last.endswith(f", {precision}")
    first, smooth = last.split("loss ")[1].split(" (chance")[0].split(" -> ")
    return float(first), float(smooth)


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_lstm_example_in_16_bits_follows_fp32(capsys, precision):
    first32, last32 = _losses(capsys, "fp32")
    first, last = _losses(capsys, precision)
    assert last < first - 1.0                     # it learns (3.82 -> 2.58 in FP32)
    assert abs(first - first32) <= 0.002 and abs(last - last32) <= 0.01   # measured: 0.0003 (bf16), 0.00001 (fp16)
