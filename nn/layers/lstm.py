"""LSTM (PyTorch's layout and gate order i, f, g, o), with backpropagation through time.

Per layer: ONE GEMM projects the inputs of all T steps at once (x W_ih^T); each step adds h W_hh^T
into its slice with one GEMM (beta = 1) and runs one fused gate kernel. Backward mirrors it: one
fused gate-gradient kernel and one GEMM (dgates W_hh) per step, then one GEMM each for dW_ih, dW_hh
and dx over all steps at once.

The buffers no caller sees (the gates, the cell states, the gate gradients) are a per-layer workspace
kept while (T, N) and the dtype stay the same, with their per-step views made once: a training step
allocates and slices only what it returns (h, the output, the state and input gradients).

Under nn.autocast a float32 LSTM runs its GEMMs in 16 bits from 16-bit copies of its weights, of the
input and of each h_t (one cast per step), accumulating into FP32 gates; the gate kernels, the cell
and hidden states and h_n, c_n stay FP32; the output is the 16-bit h (as torch.autocast's). Backward
casts each step's FP32 gate gradients to 16 bits for the GEMMs and adds FP32 weight gradients.

An LSTM built in (or converted to) float16 / bfloat16 trains in pure 16 bits, as PyTorch's
model.to(torch.bfloat16): 16-bit weights, gradients, input and output, and 16-bit GEMMs as under
autocast, while its cell and hidden states and gate kernels stay FP32 (the biases widened for them);
h_n, c_n and the state gradients come back in the weights' dtype.
"""
import math

import numpy as np

import gpublas

from .. import amp
from .. import kernels as K
from ..module import Module, uniform_param


class LSTM(Module):
    """out, (h_n, c_n) = lstm(x, state=None); x (T, N, I), or (N, T, I) with batch_first;
    state and (h_n, c_n): (num_layers, N, H) each; out (T, N, H) (or (N, T, H))."""
    kernel_families = ("lstm", "gemm", "reduce", "elementwise:binary_real", "memory", "transpose:swap01")  # nn.prefetch
    _storage_inputs = True  # 16-bit input from a layer before it under autocast

    def __init__(self, input_size, hidden_size, num_layers=1, batch_first=False, bias=True, *, dtype=np.float32):
        super().__init__()
        if input_size < 1 or hidden_size < 1 or num_layers < 1:
            raise ValueError(f"LSTM: sizes must be positive, got {input_size}, {hidden_size}, {num_layers}")
        self.input_size, self.hidden_size = int(input_size), int(hidden_size)
        self.num_layers, self.batch_first, self.has_bias = int(num_layers), bool(batch_first), bool(bias)
        H = self.hidden_size
        bound = 1.0 / math.sqrt(H)
        for k in range(num_layers):
            I = input_size if k == 0 else H
            setattr(self, f"weight_ih_l{k}", uniform_param((4 * H, I), bound, dtype))
            setattr(self, f"weight_hh_l{k}", uniform_param((4 * H, H), bound, dtype))
            if bias:
                setattr(self, f"bias_ih_l{k}", uniform_param((4 * H,), bound, dtype))
                setattr(self, f"bias_hh_l{k}", uniform_param((4 * H,), bound, dtype))
        self.cache = None
        self.dh0 = self.dc0 = None
        self._work = {}   # layer k -> _Workspace for the last (T, N, dtype)

    def extra_repr(self):
        return (f"{self.input_size}, {self.hidden_size}, num_layers={self.num_layers}, "
                f"batch_first={self.batch_first}")

    def _w(self, kind, k):
        return getattr(self, f"{kind}_l{k}", None)

    def forward(self, x, state=None):
        # x: (T, N, I) [or (N, T, I)]; state: (h0, c0) of (L, N, H); out: (T, N, H) [or (N, T, H)]
        x = self._input(x)
        if x.ndim != 3 or x.shape[2] != self.input_size:
            order = "(N, T, I)" if self.batch_first else "(T, N, I)"
            raise ValueError(f"{self.describe()}: expected input {order} with I = {self.input_size}, got {x.shape}")
        if self.batch_first:
            x = K.swap01(x, gpublas.empty((x.shape[1], x.shape[0], x.shape[2]), x.dtype))
        T, N, _ = x.shape
        L, H, dtype = self.num_layers, self.hidden_size, self.dtype   # the weights'
        sdtype = gpublas.runtime.dtypes.TABLE[dtype].compute                 # the state's: FP32 for 16-bit weights
        low = amp.compute_dtype(dtype)                                # the GEMMs' (16 bits under autocast)
        h0, c0 = amp.cast(sdtype, *self._state(state, N, dtype))
        h_n, c_n = gpublas.empty((L, N, H), sdtype), gpublas.empty((L, N, H), sdtype)
        layers = []
        (inp,) = amp.cast(low, _rows(x))
        for k in range(L):
            b_ih, b_hh = self._w("bias_ih", k), self._w("bias_hh", k)
            w_ih, w_hh = amp.cast(low, self._w("weight_ih", k).data, self._w("weight_hh", k).data)
            ws = self._workspace(k, T, N, sdtype, low)
            gates, cbuf, g_t, c_t, tc_t = ws.gates, ws.cbuf, ws.gates_t, ws.cbuf_t, ws.tanh_c_t
            # pre-activations of every step at once: (T*N, I) @ (I, 4H), W_ih read transposed
            K.gemm(inp, w_ih, ws.gates2, trans_b=True)
            hbuf = gpublas.empty((T + 1, N, H), sdtype)
            hlow = hbuf if low == sdtype else gpublas.empty((T + 1, N, H), low)  # h_t for the GEMMs
            h_t = _steps(hbuf)
            hl_t = h_t if hlow is hbuf else _steps(hlow)
            if h0 is None:
                h_t[0].fill(0)
                c_t[0].fill(0)
            else:
                h_t[0].copy_from(h0[k])
                c_t[0].copy_from(c0[k])
            b_ih, b_hh = amp.cast(sdtype, *(b.data if b is not None else None for b in (b_ih, b_hh)))
            for t in range(T + 1):
                if hlow is not hbuf:
                    gpublas.core.indexing.copy_to(hl_t[t], h_t[t])
                if t == T:
                    break
                if t > 0 or h0 is not None:  # h_{-1} = 0 contributes nothing
                    K.gemm(hl_t[t], w_hh, g_t[t], beta=1.0, trans_b=True)
                K.lstm_gates_forward(g_t[t], b_ih, b_hh, c_t[t], h_t[t + 1], c_t[t + 1], tc_t[t])
            _at(h_n, k).copy_from(h_t[T])
            _at(c_n, k).copy_from(c_t[T])
            # cached per layer: the layer's input (for dW_ih), the weights the GEMMs used (the
            # parameters or their 16-bit copies), the activated gates and every h (in the GEMMs'
            # dtype) and c including the initial ones (the gate gradients need i, f, g, o, c_{t-1}
            # and tanh(c_t), in the workspace; dW_hh needs h_{t-1}); hlow[1:] is also the layer's output
            layers.append((inp, w_ih, w_hh, gates, hlow, cbuf))
            out = hlow._view((T, N, H), hlow.strides, hlow.strides[0])  # hlow[1:]
            inp = _rows(out)
        self.cache = (layers, (T, N), h0 is not None, x.dtype)
        if self.batch_first:
            out = K.swap01(out, gpublas.empty((N, T, H), out.dtype))
        return out, amp.cast(dtype, h_n, c_n)  # a 16-bit LSTM's h_n, c_n rounded once from the FP32 state

    def _workspace(self, k, T, N, dtype, low):
        ws = self._work.get(k)
        if ws is None or ws.key != (T, N, dtype, low):
            ws = self._work[k] = _Workspace(T, N, self.hidden_size, dtype, low)
        return ws

    def _state(self, state, N, dtype):
        if state is None:
            return None, None
        shape = (self.num_layers, N, self.hidden_size)
        h0, c0 = (self._input(s) for s in state)
        if h0.shape != shape or c0.shape != shape:
            raise ValueError(f"{self.describe()}: expected state (h0, c0) of shape {shape} each, "
                             f"got {h0.shape} and {c0.shape}")
        return h0, c0

    def backward(self, d_out, d_hn=None, d_cn=None):
        # d_out: like out; d_hn, d_cn: (L, N, H) or None -> dx: like x; adds every weight's gradient.
        # Also sets self.dh0, self.dc0 (L, N, H): the gradients of the initial state.
        layers, (T, N), _, x_dtype = self._cached("cache")
        L, H, dtype = self.num_layers, self.hidden_size, self.dtype
        sdtype = gpublas.runtime.dtypes.TABLE[dtype].compute
        d_out = self._grad_input(d_out, (N, T, H) if self.batch_first else (T, N, H), dtype)
        if self.batch_first:
            d_out = K.swap01(d_out, gpublas.empty((T, N, H), d_out.dtype))
        (d_out,) = amp.cast(sdtype, d_out)  # the gate kernels' dtype (a 16-bit d_out under autocast)
        for name, d in (("d_hn", d_hn), ("d_cn", d_cn)):
            if d is not None and tuple(d.shape) != (L, N, H):
                raise ValueError(f"{self.describe()}: {name} must have shape {(L, N, H)}, got {tuple(d.shape)}")
        d_hn, d_cn = amp.cast(sdtype, *(self._input(self._grad_dtype(d, dtype)) if d is not None else None
                                        for d in (d_hn, d_cn)))
        self.dh0, self.dc0 = gpublas.empty((L, N, H), sdtype), gpublas.empty((L, N, H), sdtype)
        d_t = _steps(d_out)
        for k in reversed(range(L)):
            inp, w_ih, w_hh, gates, hlow, cbuf = layers[k]
            ws = self._work[k]
            g_t, c_t, tc_t, dg_t, dl_t = ws.gates_t, ws.cbuf_t, ws.tanh_c_t, ws.dgates_t, ws.dlow_t
            dc, dh_rec = _at(self.dc0, k), _at(self.dh0, k)  # running dL/dc_t and recurrent dL/dh_t buffers
            if d_cn is not None:
                dc.copy_from(_at(d_cn, k))
            else:
                dc.fill(0)
            has_rec = d_hn is not None
            if has_rec:
                dh_rec.copy_from(_at(d_hn, k))
            for t in reversed(range(T)):
                # dgates[t] from dh_t = d_out[t] + (recurrent part), and dc_t -> dc_{t-1} in place
                K.lstm_gates_backward(g_t[t], c_t[t], tc_t[t], d_t[t], dh_rec if has_rec else None, dc, dg_t[t])
                if dl_t is not dg_t:
                    gpublas.core.indexing.copy_to(dl_t[t], dg_t[t])  # the gate gradients for the 16-bit GEMMs
                # a_t = ... + h_{t-1} W_hh^T  =>  dL/dh_{t-1} (recurrent part) = dgates_t W_hh
                K.gemm(dl_t[t], w_hh, dh_rec)
                has_rec = True
            dg2 = ws.dlow2
            # a = x W_ih^T + h_prev W_hh^T + b  =>  dW_ih = dg^T x, dW_hh = dg^T h_prev, db = sum dg
            # (into the FP32 .grad: a float32 C accumulates 16-bit products under autocast)
            K.gemm(dg2, inp, self._w("weight_ih", k).grad, beta=1.0, trans_a=True)
            K.gemm(dg2, hlow._view((T * N, H), hlow.strides[1:]), self._w("weight_hh", k).grad, beta=1.0,
                   trans_a=True)  # h_0 .. h_{T-1}: hlow[0:T] as rows (hlow is contiguous)
            biases = [b for b in (self._w("bias_ih", k), self._w("bias_hh", k)) if b is not None]
            if len(biases) == 2 and all(b.grad.dtype == sdtype for b in biases):
                # both get sum dg: one reduction, added to each (b + 1 * s = b + s: the same bits)
                K.bias_grad_sum(ws.dgates2, ws.dbias, 4 * H, 1, accumulate=False)
                for b in biases:
                    gpublas.add(b.grad, ws.dbias, out=b.grad)
            else:
                for b in biases:
                    K.bias_grad_sum(ws.dgates2, b.grad, 4 * H, 1)
            # dL/dx = dg W_ih: the next layer down's d_out (in the state's dtype, for its gate kernels)
            d_out = gpublas.empty((T, N, inp.shape[1]), sdtype)
            K.gemm(dg2, w_ih, _rows(d_out))
            d_t = _steps(d_out) if k else None
        (d_out,) = amp.cast(x_dtype, d_out)  # dx in the input's dtype
        self.dh0, self.dc0 = amp.cast(dtype, self.dh0, self.dc0)  # and the state's gradients in the state's
        if self.batch_first:
            return K.swap01(d_out, gpublas.empty((N, T, self.input_size), d_out.dtype))
        return d_out


def _at(buf, t):
    """buf[t], built from its layout directly (no indexing machinery: a step asks for many)."""
    return buf._view(buf.shape[1:], buf.strides[1:], t * buf.strides[0])


def _steps(buf):
    """[buf[0], buf[1], ...]: buf's views along its first axis."""
    return [_at(buf, t) for t in range(buf.shape[0])]


def _rows(x):
    """A (T, N, K) array as (T*N, K) rows: a view of a contiguous one (built directly), else reshape's copy."""
    T, N, K = x.shape
    return x._view((T * N, K), x.strides[1:]) if x.c_contiguous else x.reshape(T * N, K)


class _Workspace:
    """One layer's buffers for a (T, N) batch that no caller sees: the activated gates (T, N, 4H), the
    cell states c_0..c_T (T + 1, N, H) and tanh(c_1)..tanh(c_T) (T, N, H), cached by forward for
    backward (which would otherwise compute tanh(c) again), the bias gradients' sum (4H,), and the gate
    gradients
    (T, N, 4H) of backward; each with its per-step views (and the gates' (T*N, 4H) view for the GEMMs).
    Under autocast (`low` a 16-bit dtype) also the gate gradients' 16-bit copies (dlow) for the GEMMs;
    else dlow is dgates itself."""

    def __init__(self, T, N, H, dtype, low):
        self.key = (T, N, dtype, low)
        self.gates = gpublas.empty((T, N, 4 * H), dtype)
        self.cbuf = gpublas.empty((T + 1, N, H), dtype)
        self.tanh_c = gpublas.empty((T, N, H), dtype)
        self.dbias = gpublas.empty((4 * H,), dtype)
        self.dgates = gpublas.empty((T, N, 4 * H), dtype)
        self.dlow = self.dgates if low == dtype else gpublas.empty((T, N, 4 * H), low)
        self.gates2, self.dgates2 = self.gates.reshape(T * N, 4 * H), self.dgates.reshape(T * N, 4 * H)
        self.dlow2 = self.dlow.reshape(T * N, 4 * H)
        self.gates_t, self.cbuf_t, self.dgates_t = _steps(self.gates), _steps(self.cbuf), _steps(self.dgates)
        self.tanh_c_t = _steps(self.tanh_c)
        self.dlow_t = self.dgates_t if low == dtype else _steps(self.dlow)
