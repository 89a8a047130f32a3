"""train's PyTorch peer: the same model, weights and SGD step in torch.nn on the same device. In FP32
for the STEP row; for the STEP bf16 / fp16 rows under torch.autocast with the same 16-bit dtype (and,
for fp16, torch.amp.GradScaler, as nn's step uses nn.amp.GradScaler), so that every ratio compares
like with like: 16-bit GEMMs and convolutions on both sides, losses and weights in FP32."""
import statistics
import time

import numpy as np

import gpublas

AUTOCAST = {"bf16": "bfloat16", "fp16": "float16"}   # --precision -> torch dtype name (fp32: no autocast)


def device():
    """Where the peer runs, or None: "cuda" on the cuda backend with a CUDA build of PyTorch; "cpu" on the
    sim with any PyTorch (the same cores: torch, like the simulator, takes OMP_NUM_THREADS threads)."""
    try:
        import torch
    except Exception:
        return None
    if gpublas.backend() == "cuda":
        return "cuda" if torch.cuda.is_available() else None
    return "cpu"


def torch_model(layers, state, device="cuda"):
    """The same model in torch.nn on `device` with the same weights, or None for a layer it cannot mirror."""
    import torch

    import nn
    from nn.examples.precision import FP32Dense

    mods = []
    for name, m in layers:
        if isinstance(m, nn.Conv2d):
            t = torch.nn.Conv2d(m.in_channels, m.out_channels, m.kernel_size, m.stride, m.padding,
                                bias=m.bias is not None)
        elif isinstance(m, nn.MaxPool2d):
            t = torch.nn.MaxPool2d(m.kernel_size, m.stride, m.padding)
        elif isinstance(m, nn.Dense):
            make = _fp32_linear() if isinstance(m, FP32Dense) else torch.nn.Linear
            t = make(m.in_features, m.out_features, bias=m.bias is not None)
        elif isinstance(m, (nn.ReLU, nn.Tanh, nn.Sigmoid)):
            t = {"ReLU": torch.nn.ReLU, "Tanh": torch.nn.Tanh, "Sigmoid": torch.nn.Sigmoid}[type(m).__name__]()
        elif isinstance(m, nn.Flatten):
            t = torch.nn.Flatten()
        elif isinstance(m, nn.Dropout):
            t = torch.nn.Identity()
        elif isinstance(getattr(m, "lstm", None), nn.LSTM):  # train.LastStateLSTM: its output is h_T
            t = _last_state_lstm(m.lstm.input_size, m.lstm.hidden_size)
        elif isinstance(m, nn.models.GPT):  # train.GPTRows: the logits as rows
            t = _rows(torch_gpt(m))
        else:
            return None
        sd = {k.split(".", 1)[1]: torch.from_numpy(v) for k, v in state.items() if k.split(".", 1)[0] == name}
        t.load_state_dict(sd)
        mods.append(t)
    return torch.nn.Sequential(*mods).to(device)


def _fp32_linear():
    """torch.nn.Linear computing in FP32 within autocast too: the examples' FP32Dense head."""
    import torch

    class FP32Linear(torch.nn.Linear):
        def forward(self, x):
            with torch.autocast(x.device.type, enabled=False):
                return super().forward(x.float())

    return FP32Linear


def _rows(gpt):
    import torch

    class Rows(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gpt = gpt

        def forward(self, idx):
            return self.gpt(idx.long()).flatten(0, 1)

        def load_state_dict(self, state, strict=True):
            return self.gpt.load_state_dict(state, strict)

    return Rows()


def _last_state_lstm(i, h):
    import torch

    class LastState(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = torch.nn.LSTM(i, h)

        def forward(self, x):
            return self.lstm(x)[1][0][0]

    return LastState()


def time_torch(ctx, layers, state, x, labels, lr, momentum, precision="fp32", device="cuda", graph=False):
    """The same step in PyTorch: {"ms": median ms per step, "first_loss", "dtypes" (the dtype of each
    layer's output: float32, or the autocast dtype), "scale" (GradScaler's after the run, 1.0 when
    disabled)}; None when the model has a layer PyTorch cannot mirror here. A step is zero_grad,
    forward and cross-entropy under torch.autocast(device, dtype) (cross-entropy in FP32, autocast's
    rule), scaler.scale(loss).backward(), scaler.step(opt), scaler.update(); on the GPU timed with
    CUDA events, elsewhere (tests) with the host clock. graph=True on CUDA without a GradScaler (whose
    step decides on the host) also times the step captured once in a CUDA graph and replayed
    (captured(): "graph_ms", or "graph_error" with the reason a capture failed)."""
    import torch

    if precision not in ("fp32", *AUTOCAST):
        raise ValueError(f"time_torch: precision must be fp32, bf16 or fp16, got {precision!r}")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    model = torch_model(layers, state, device)
    if model is None:
        return None
    low = getattr(torch, AUTOCAST[precision]) if precision in AUTOCAST else None
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    scaler = torch.amp.GradScaler(device, enabled=precision == "fp16")
    tx, ty = torch.from_numpy(x).to(device), torch.from_numpy(labels.astype(np.int64)).to(device)
    lossf = torch.nn.CrossEntropyLoss()
    out = {"dtypes": [None] * len(model)}

    def note(i):   # a hook writing layer i's output dtype (on the first step only: none is timed)
        def hook(module, args, y):
            out["dtypes"][i] = str(y.dtype).replace("torch.", "")
        return hook

    hooks = [layer.register_forward_hook(note(i)) for i, layer in enumerate(model)]

    def step():
        opt.zero_grad()
        with torch.autocast(device, dtype=low or torch.bfloat16, enabled=low is not None):
            loss = lossf(model(tx), ty)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss.item()

    out["first_loss"] = step()
    for h in hooks:
        h.remove()
    out.update(ms=median_ms(ctx, step, device), scale=scaler.get_scale() if scaler.is_enabled() else 1.0)
    if graph and device == "cuda" and not scaler.is_enabled():
        def body():  # the step without its host read-back, the gradients assigned (None before the capture)
            with torch.autocast(device, dtype=low or torch.bfloat16, enabled=low is not None, cache_enabled=False):
                loss = lossf(model(tx), ty)
            loss.backward()
            opt.step()
        out.update(graph_timing(ctx, lambda: opt.zero_grad(set_to_none=True), body))
    return out


def captured(zero, body, warmup=3):
    """PyTorch's whole-step CUDA graph, as PyTorch's CUDA-graph notes capture a training step: body() run
    `warmup` times on a side stream (cuBLAS and cuDNN handles, the optimizer's state made), the gradients set to
    None by zero() so that the captured backward allocates them from the graph's pool and assigns them, then one
    capture; returns the graph's replay, one step."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            zero()
            body()
    torch.cuda.current_stream().wait_stream(side)
    zero()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        body()
    return g.replay


def graph_timing(ctx, zero, body):
    """{"graph_ms": median ms of a replayed step} or, where PyTorch cannot capture it, {"graph_error": why}: the
    GPU run goes on without that figure rather than losing the suite."""
    try:
        return {"graph_ms": median_ms(ctx, captured(zero, body), "cuda")}
    except Exception as e:  # torch raises RuntimeError (capture), AssertionError (optimizer checks) and others
        return {"graph_error": f"{type(e).__name__}: {e}"}


def median_ms(ctx, step, device):
    """Median ms of ctx.repeats calls of step() after ctx.warmup untimed ones: CUDA events around each on the
    GPU, the host clock elsewhere (tests)."""
    import torch

    for _ in range(ctx.warmup):
        step()
    times = []
    for _ in range(ctx.repeats):
        if device == "cuda":
            b, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            b.record()
            step()
            e.record()
            e.synchronize()
            times.append(b.elapsed_time(e))
        else:
            t0 = time.perf_counter()
            step()
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def torch_gpt(net, device="cpu"):
    """A torch.nn twin of an nn.models.GPT `net` with its weights (the same state_dict keys): nanoGPT's model
    written with torch.nn.TransformerEncoderLayer blocks, the head tied to wte."""
    import torch
    import torch.nn.functional as F

    C, H, L = net.n_embd, net.n_head, net.n_layer
    bias = net.ln_f.bias is not None

    class TorchGPT(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = torch.nn.Embedding(net.vocab_size, C)
            self.wpe = torch.nn.Embedding(net.block_size, C)
            self.drop = torch.nn.Dropout(net.drop.p)
            self.h = torch.nn.Sequential(*(torch.nn.TransformerEncoderLayer(
                C, H, 4 * C, net.drop.p, activation=lambda x: F.gelu(x, approximate="tanh"), batch_first=True,
                norm_first=True, bias=bias) for _ in range(L)))
            self.ln_f = torch.nn.LayerNorm(C, bias=bias)

        def forward(self, idx):
            T = idx.shape[1]
            x = self.drop(self.wte(idx) + self.wpe(torch.arange(T, device=idx.device)))
            mask = torch.nn.Transformer.generate_square_subsequent_mask(T, device=idx.device, dtype=x.dtype)
            for block in self.h:
                x = block(x, src_mask=mask, is_causal=True)
            return self.ln_f(x) @ self.wte.weight.T

    model = TorchGPT().to(dtype=getattr(torch, str(net.dtype)))
    model.load_state_dict({k: torch.from_numpy(v) for k, v in net.state_dict().items()})
    return model.to(device)
