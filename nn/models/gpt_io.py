"""GPT-2's weights in and out of nn.models.GPT, in the two layouts people hold them in.

transformers' directory (GPT2LMHeadModel.save_pretrained / the hub's "gpt2"): config.json and model.safetensors
(or pytorch_model.bin, read and written where torch is installed). Its linear layers are Conv1D, weights stored
(in, out): c_attn (C, 3C) is in_proj_weight^T (q, k, v in that order both ways), c_proj, c_fc and the MLP's c_proj
likewise; lm_head is tied to wte (not stored, or stored equal). Keys may carry the "transformer." prefix
(GPT2LMHeadModel) or not (GPT2Model, the hub's file); the causal-mask buffers older files hold (attn.bias,
attn.masked_bias) are skipped.

llm.c's checkpoint (train_gpt2.py write_model, read by train_gpt2.c gpt2_build_from_checkpoint): a header of 256
int32 (magic 20240326, version 3 = float32 or 5 = bfloat16, max T, vocab size, layers, heads, channels, padded
vocab size), then 16 tensors in this order, each for all layers at once: wte (Vp, C) (rows past V zero), wpe
(maxT, C), ln_1 weight and bias (L, C), c_attn weight (L, 3C, C) and bias (L, 3C), attn c_proj weight (L, C, C)
and bias, ln_2 weight and bias, c_fc weight (L, 4C, C) and bias (L, 4C), mlp c_proj weight (L, C, 4C) and bias,
ln_f weight and bias (C,). Its weights are nn.Linear's (out, in): nn's own layout.

Every file is read and checked whole before a model is built: a bad file raises GPTLoadError naming the file,
the tensor and what is wrong, and nothing is half-loaded.
"""
import json
import os

import numpy as np

LLMC_MAGIC = 20240326
HF_SKIPPED = (".attn.bias", ".attn.masked_bias")   # the causal mask buffers of older files, not parameters
CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")


class GPTLoadError(ValueError):
    """A GPT-2 file nn cannot load: which file, which tensor, and why."""


def _hf_names(L):
    """[(hf name, nn name)] of every parameter, in the hub's order."""
    pairs = [("wte.weight", "wte.weight"), ("wpe.weight", "wpe.weight")]
    for i in range(L):
        h, n = f"h.{i}.", f"h.{i}."
        pairs += [(h + "ln_1.weight", n + "norm1.weight"), (h + "ln_1.bias", n + "norm1.bias"),
                  (h + "attn.c_attn.weight", n + "self_attn.in_proj_weight"),
                  (h + "attn.c_attn.bias", n + "self_attn.in_proj_bias"),
                  (h + "attn.c_proj.weight", n + "self_attn.out_proj.weight"),
                  (h + "attn.c_proj.bias", n + "self_attn.out_proj.bias"),
                  (h + "ln_2.weight", n + "norm2.weight"), (h + "ln_2.bias", n + "norm2.bias"),
                  (h + "mlp.c_fc.weight", n + "linear1.weight"), (h + "mlp.c_fc.bias", n + "linear1.bias"),
                  (h + "mlp.c_proj.weight", n + "linear2.weight"), (h + "mlp.c_proj.bias", n + "linear2.bias")]
    return pairs + [("ln_f.weight", "ln_f.weight"), ("ln_f.bias", "ln_f.bias")]


def _shapes(V, T, L, C):
    """nn's parameter shapes by nn name."""
    out = {"wte.weight": (V, C), "wpe.weight": (T, C), "ln_f.weight": (C,), "ln_f.bias": (C,)}
    for i in range(L):
        n = f"h.{i}."
        out.update({n + "norm1.weight": (C,), n + "norm1.bias": (C,), n + "self_attn.in_proj_weight": (3 * C, C),
                    n + "self_attn.in_proj_bias": (3 * C,), n + "self_attn.out_proj.weight": (C, C),
                    n + "self_attn.out_proj.bias": (C,), n + "norm2.weight": (C,), n + "norm2.bias": (C,),
                    n + "linear1.weight": (4 * C, C), n + "linear1.bias": (4 * C,), n + "linear2.weight": (C, 4 * C),
                    n + "linear2.bias": (C,)})
    return out


def _config(path):
    file = os.path.join(path, "config.json")
    try:
        with open(file) as f:
            cfg = json.load(f)
    except FileNotFoundError:
        raise GPTLoadError(f"{path}: no config.json (a transformers GPT-2 directory holds config.json and "
                           "model.safetensors)") from None
    except json.JSONDecodeError as e:
        raise GPTLoadError(f"{file}: not valid JSON ({e})") from None
    missing = [k for k in ("vocab_size", "n_positions", "n_embd", "n_layer", "n_head") if not isinstance(cfg.get(k), int)]
    if missing:
        raise GPTLoadError(f"{file}: missing or non-integer {', '.join(missing)}")
    C = cfg["n_embd"]
    unsupported = [(k, cfg.get(k), ok) for k, ok in (
        ("activation_function", ("gelu_new", "gelu_pytorch_tanh")), ("n_inner", (None, 4 * C)),
        ("tie_word_embeddings", (True,)), ("scale_attn_by_inverse_layer_idx", (False,)),
        ("scale_attn_weights", (True,)), ("add_cross_attention", (False,)))
        if cfg.get(k, ok[0]) not in ok]
    if unsupported:
        k, v, ok = unsupported[0]
        raise GPTLoadError(f"{file}: {k} = {v!r} is not GPT-2 as nn.models.GPT builds it (expected {ok[0]!r})")
    return cfg


def _read_tensors(path):
    """{name: ndarray} of model.safetensors (the safetensors package, no torch), else pytorch_model.bin (torch)."""
    st, bin_ = os.path.join(path, "model.safetensors"), os.path.join(path, "pytorch_model.bin")
    if os.path.exists(st):
        try:
            from safetensors.numpy import load_file
        except ImportError:
            raise ImportError("GPT.from_pretrained reads model.safetensors with the safetensors package: "
                              "pip install 'gpublas[hf]'") from None
        try:
            return st, load_file(st)
        except Exception as e:   # safetensors' SafetensorError: a truncated or corrupt file
            raise GPTLoadError(f"{st}: unreadable ({type(e).__name__}: {e}); truncated or not a safetensors file") from None
    if os.path.exists(bin_):
        try:
            import torch
        except ImportError:
            raise ImportError(f"{bin_}: reading pytorch_model.bin needs torch (or convert it to model.safetensors)") from None
        try:
            state = torch.load(bin_, map_location="cpu", weights_only=True)
        except Exception as e:
            raise GPTLoadError(f"{bin_}: unreadable ({type(e).__name__}: {e})") from None
        return bin_, {k: v.float().numpy() if v.dtype == torch.bfloat16 else v.numpy() for k, v in state.items()}
    raise GPTLoadError(f"{path}: neither model.safetensors nor pytorch_model.bin")


def from_pretrained(cls, path, dtype=None):
    """A GPT built from a transformers GPT-2 directory (see the module's docstring); dtype None: the file's."""
    cfg = _config(path)
    V, T, L, H, C = (cfg[k] for k in ("vocab_size", "n_positions", "n_layer", "n_head", "n_embd"))
    if C % H:
        raise GPTLoadError(f"{path}/config.json: n_embd {C} is not divisible by n_head {H}")
    file, tensors = _read_tensors(path)
    tensors = {k[len("transformer."):] if k.startswith("transformer.") else k: v for k, v in tensors.items()}
    tensors = {k: v for k, v in tensors.items() if not k.endswith(HF_SKIPPED)}
    head = tensors.pop("lm_head.weight", None)
    shapes, state = _shapes(V, T, L, C), {}
    pairs = _hf_names(L)
    for hf, name in pairs:
        if hf not in tensors:
            raise GPTLoadError(f"{file}: missing tensor '{hf}' (config.json: {L} layers)")
        a = tensors[hf]
        want = shapes[name][::-1] if hf.endswith(CONV1D) else shapes[name]
        if a.shape != want:
            raise GPTLoadError(f"{file}: tensor '{hf}' has shape {a.shape}; config.json (vocab_size {V}, n_positions "
                               f"{T}, n_embd {C}, n_layer {L}) says {want}")
        if a.dtype.kind != "f":
            raise GPTLoadError(f"{file}: tensor '{hf}' holds {a.dtype}, not floats")
        state[name] = a.T if hf.endswith(CONV1D) else a
    extra = sorted(set(tensors) - {hf for hf, _ in pairs})
    if extra:
        raise GPTLoadError(f"{file}: unexpected tensor(s) {', '.join(repr(e) for e in extra[:5])} (not GPT-2's with "
                           f"config.json's {L} layers)")
    if head is not None and not np.array_equal(head, state["wte.weight"]):
        raise GPTLoadError(f"{file}: 'lm_head.weight' differs from 'wte.weight'; nn's GPT ties the head to wte")
    dtype = np.dtype(dtype or state["wte.weight"].dtype)
    model = cls(V, T, L, H, C, dtype=dtype)
    eps = float(cfg.get("layer_norm_epsilon", 1e-5))
    for m in model.modules():
        if hasattr(m, "normalized_shape"):
            m.eps = eps
    model.load_state_dict({k: np.ascontiguousarray(v, dtype=dtype) for k, v in state.items()})
    return model


def save_pretrained(model, path, safe_serialization=True):
    """model as a transformers GPT-2 directory: config.json and model.safetensors (safe_serialization=False:
    pytorch_model.bin, with torch), keys "transformer.*" as GPT2LMHeadModel writes them, lm_head tied (absent)."""
    os.makedirs(path, exist_ok=True)
    state = model.state_dict()
    eps = next(m.eps for m in model.modules() if hasattr(m, "normalized_shape"))
    cfg = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "activation_function": "gelu_new",
           "vocab_size": model.vocab_size, "n_positions": model.block_size, "n_ctx": model.block_size,
           "n_embd": model.n_embd, "n_layer": model.n_layer, "n_head": model.n_head, "n_inner": None,
           "layer_norm_epsilon": eps, "tie_word_embeddings": True, "scale_attn_weights": True,
           "resid_pdrop": model.drop.p, "embd_pdrop": model.drop.p, "attn_pdrop": model.drop.p,
           "initializer_range": 0.02, "bos_token_id": model.vocab_size - 1, "eos_token_id": model.vocab_size - 1,
           "torch_dtype": str(np.dtype(state["wte.weight"].dtype))}
    out = {}
    for hf, name in _hf_names(model.n_layer):
        a = state[name]
        out["transformer." + hf] = np.ascontiguousarray(a.T if hf.endswith(CONV1D) else a)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    if safe_serialization:
        from safetensors.numpy import save_file
        save_file(out, os.path.join(path, "model.safetensors"), metadata={"format": "pt"})
    else:
        import torch
        torch.save({k: torch.from_numpy(v) for k, v in out.items()}, os.path.join(path, "pytorch_model.bin"))
    return path


# -- llm.c ------------------------------------------------------------------------------------------------------
def _llmc_tensors(V, Vp, T, L, C):
    """[(llm.c's name, shape, nn names: one, or one per layer for the (L, ...) tensors)] in the checkpoint's order."""
    per = [("ln1w", (C,), "norm1.weight"), ("ln1b", (C,), "norm1.bias"),
           ("qkvw", (3 * C, C), "self_attn.in_proj_weight"), ("qkvb", (3 * C,), "self_attn.in_proj_bias"),
           ("attprojw", (C, C), "self_attn.out_proj.weight"), ("attprojb", (C,), "self_attn.out_proj.bias"),
           ("ln2w", (C,), "norm2.weight"), ("ln2b", (C,), "norm2.bias"),
           ("fcw", (4 * C, C), "linear1.weight"), ("fcb", (4 * C,), "linear1.bias"),
           ("fcprojw", (C, 4 * C), "linear2.weight"), ("fcprojb", (C,), "linear2.bias")]
    out = [("wte", (Vp, C), ["wte.weight"]), ("wpe", (T, C), ["wpe.weight"])]
    out += [(n, (L,) + s, [f"h.{i}.{nn_name}" for i in range(L)]) for n, s, nn_name in per]
    return out + [("lnfw", (C,), ["ln_f.weight"]), ("lnfb", (C,), ["ln_f.bias"])]


def _bf16():
    import ml_dtypes
    return np.dtype(ml_dtypes.bfloat16)


def from_llmc(cls, path, dtype=np.float32):
    """A GPT from llm.c's checkpoint (gpt2_124M.bin; see the module's docstring), float32 or bfloat16 data."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 1024:
        raise GPTLoadError(f"{path}: {len(raw)} bytes, shorter than llm.c's 1024-byte header")
    header = np.frombuffer(raw[:1024], np.int32)
    if header[0] != LLMC_MAGIC:
        raise GPTLoadError(f"{path}: bad magic {header[0]} (llm.c's model files start with {LLMC_MAGIC})")
    if header[1] not in (3, 5):
        raise GPTLoadError(f"{path}: checkpoint version {header[1]}; nn reads 3 (float32) and 5 (bfloat16), "
                           "padded vocab")
    file_dtype = np.dtype(np.float32) if header[1] == 3 else _bf16()
    T, V, L, H, C, Vp = (int(x) for x in header[2:8])
    if min(T, V, L, H, C) < 1 or Vp < V or C % H:
        raise GPTLoadError(f"{path}: header sizes max_T {T}, vocab {V}, padded vocab {Vp}, layers {L}, heads {H}, "
                           f"channels {C} do not describe a GPT-2")
    state, offset = {}, 1024
    for name, shape, targets in _llmc_tensors(V, Vp, T, L, C):
        n = int(np.prod(shape)) * file_dtype.itemsize
        if offset + n > len(raw):
            raise GPTLoadError(f"{path}: truncated: the file ends inside tensor '{name}' {shape} (needs {offset + n} "
                               f"bytes, has {len(raw)})")
        a = np.frombuffer(raw[offset:offset + n], file_dtype).reshape(shape).astype(np.float32)
        offset += n
        if name == "wte":
            a = a[:V]
        for i, t in enumerate(targets):
            state[t] = a[i] if t.startswith("h.") else a
    if offset != len(raw):
        raise GPTLoadError(f"{path}: {len(raw) - offset} bytes past the last tensor (ln_f bias): not the header's "
                           "GPT-2")
    model = cls(V, T, L, H, C, dtype=dtype)
    model.load_state_dict({k: np.ascontiguousarray(v, dtype=dtype) for k, v in state.items()})
    return model


def save_llmc(model, path, dtype="float32"):
    """model as llm.c's checkpoint, version 3 (float32) or 5 (bfloat16), the vocab padded to a multiple of 128."""
    if dtype not in ("float32", "bfloat16"):
        raise ValueError(f"save_llmc: dtype must be 'float32' or 'bfloat16', got {dtype!r}")
    file_dtype = np.dtype(np.float32) if dtype == "float32" else _bf16()
    V, T, L, C = model.vocab_size, model.block_size, model.n_layer, model.n_embd
    Vp = -(-V // 128) * 128
    header = np.zeros(256, np.int32)
    header[:8] = [LLMC_MAGIC, 3 if dtype == "float32" else 5, T, V, L, model.n_head, C, Vp]
    state = model.state_dict()
    with open(path, "wb") as f:
        f.write(header.tobytes())
        for name, shape, targets in _llmc_tensors(V, Vp, T, L, C):
            a = np.stack([state[t] for t in targets]) if targets[0].startswith("h.") else state[targets[0]]
            if name == "wte":
                a = np.concatenate([a, np.zeros((Vp - V, C), a.dtype)])
            f.write(np.ascontiguousarray(a.astype(np.float32).astype(file_dtype)).reshape(shape).tobytes())
    return path
