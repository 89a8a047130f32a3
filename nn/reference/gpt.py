"""NumPy twin of nn.models.GPT (forward and backward on the host): the train benchmark's reference step
for its GPT row, in the form of nn/reference/layers.py's layers (params, grads, forward, backward)."""
import numpy as np

GELU_K = np.sqrt(2.0 / np.pi)


def layernorm(x, w, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    rstd = 1.0 / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps)
    xhat = (x - mu) * rstd
    return xhat * w + b, (xhat, rstd)


def layernorm_backward(dy, w, cache):
    xhat, rstd = cache
    g = dy * w
    dx = rstd * (g - g.mean(-1, keepdims=True) - xhat * (g * xhat).mean(-1, keepdims=True))
    axes = tuple(range(dy.ndim - 1))
    return dx, (dy * xhat).sum(axes), dy.sum(axes)


def gelu_tanh(x):
    t = np.tanh(GELU_K * (x + 0.044715 * x ** 3))
    return 0.5 * x * (1 + t), t


def gelu_tanh_backward(dy, x, t):
    return dy * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * GELU_K * (1 + 3 * 0.044715 * x * x))


class NpGPT:
    """GPT's step on the host from an nn GPT's state_dict `w` (names without the model's prefix); forward(idx)
    returns the logits as (B*T, V) rows for nn.reference.layers.np_softmax_xent, backward(dlogits) fills grads."""

    def __init__(self, w, n_layer, n_head):
        self.params, self.n_layer, self.n_head = w, n_layer, n_head
        self.grads = {}

    def _linear(self, x, name):
        return x @ self.params[f"{name}.weight"].T + self.params[f"{name}.bias"]

    def _linear_backward(self, dy, x, name):
        self.grads[f"{name}.weight"] = dy.reshape(-1, dy.shape[-1]).T @ x.reshape(-1, x.shape[-1])
        self.grads[f"{name}.bias"] = dy.reshape(-1, dy.shape[-1]).sum(0)
        return dy @ self.params[f"{name}.weight"]

    def forward(self, idx):
        p, H = self.params, self.n_head
        B, T = idx.shape
        x = p["wte.weight"][idx] + p["wpe.weight"][:T]
        C = x.shape[-1]
        D = C // H
        mask = np.triu(np.full((T, T), -np.inf, x.dtype), 1)
        self.cache = []
        for l in range(self.n_layer):
            pre = f"h.{l}."
            h1, ln1 = layernorm(x, p[pre + "norm1.weight"], p[pre + "norm1.bias"])
            qkv = h1 @ p[pre + "self_attn.in_proj_weight"].T + p[pre + "self_attn.in_proj_bias"]
            q, k, v = qkv.reshape(B, T, 3, H, D).transpose(2, 0, 3, 1, 4)        # (B, H, T, D) each
            s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(D) + mask
            e = np.exp(s - s.max(-1, keepdims=True))
            att = e / e.sum(-1, keepdims=True)
            y = (att @ v).transpose(0, 2, 1, 3).reshape(B, T, C)
            x = x + self._linear(y, pre + "self_attn.out_proj")
            h2, ln2 = layernorm(x, p[pre + "norm2.weight"], p[pre + "norm2.bias"])
            f = self._linear(h2, pre + "linear1")
            g, t = gelu_tanh(f)
            x = x + self._linear(g, pre + "linear2")
            self.cache.append((h1, ln1, q, k, v, att, y, h2, ln2, f, g, t))
        xf, lnf = layernorm(x, p["ln_f.weight"], p["ln_f.bias"])
        self.idx, self.xf, self.lnf = idx, xf, lnf
        return (xf @ p["wte.weight"].T).reshape(B * T, -1)

    def backward(self, dlogits):
        p, H = self.params, self.n_head
        B, T = self.idx.shape
        V, C = p["wte.weight"].shape
        D = C // H
        d = dlogits.reshape(B, T, V)
        dwte = d.reshape(-1, V).T @ self.xf.reshape(-1, C)                       # the tied head
        dx, self.grads["ln_f.weight"], self.grads["ln_f.bias"] = layernorm_backward(d @ p["wte.weight"],
                                                                                   p["ln_f.weight"], self.lnf)
        for l in reversed(range(self.n_layer)):
            pre = f"h.{l}."
            h1, ln1, q, k, v, att, y, h2, ln2, f, g, t = self.cache[l]
            dg = self._linear_backward(dx, g, pre + "linear2")
            dh2 = self._linear_backward(gelu_tanh_backward(dg, f, t), h2, pre + "linear1")
            dh, self.grads[pre + "norm2.weight"], self.grads[pre + "norm2.bias"] = layernorm_backward(
                dh2, p[pre + "norm2.weight"], ln2)
            dx = dx + dh
            dy = self._linear_backward(dx, y, pre + "self_attn.out_proj").reshape(B, T, H, D).transpose(0, 2, 1, 3)
            datt = dy @ v.transpose(0, 1, 3, 2)
            dv = att.transpose(0, 1, 3, 2) @ dy
            ds = att * (datt - (datt * att).sum(-1, keepdims=True)) / np.sqrt(D)
            dq, dk = ds @ k, ds.transpose(0, 1, 3, 2) @ q
            dqkv = np.stack([dq, dk, dv]).transpose(1, 3, 0, 2, 4).reshape(B, T, 3 * C)
            self.grads[pre + "self_attn.in_proj_weight"] = dqkv.reshape(-1, 3 * C).T @ h1.reshape(-1, C)
            self.grads[pre + "self_attn.in_proj_bias"] = dqkv.reshape(-1, 3 * C).sum(0)
            dh, self.grads[pre + "norm1.weight"], self.grads[pre + "norm1.bias"] = layernorm_backward(
                dqkv @ p[pre + "self_attn.in_proj_weight"], p[pre + "norm1.weight"], ln1)
            dx = dx + dh
        self.grads["wpe.weight"] = np.zeros_like(p["wpe.weight"])
        self.grads["wpe.weight"][:T] = dx.sum(0)
        np.add.at(dwte, self.idx.reshape(-1), dx.reshape(-1, C))
        self.grads["wte.weight"] = dwte
        return None
