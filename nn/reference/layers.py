"""NumPy references of nn's maths, for the tests and the train benchmark (never used by nn itself).

Functions (forward only, the direct formulas the tests compare against): conv2d, pool2d, lstm, sgd,
adam, batchnorm_train, batchnorm_eval.
Layers with forward and backward (same layouts as nn, float64 or float32 on the host): NpConv2d
(im2col), NpMaxPool2d (non-overlapping windows), NpDense, NpAct, NpFlatten, NpIdentity, NpLSTM;
np_softmax_xent; NpModel runs a whole training step (benchmarks/train.py times it).
"""
import numpy as np


def conv2d(x, w, b, stride=(1, 1), padding=(0, 0), dilation=(1, 1)):
    """The direct formula y[n,o,i,j] = b[o] + sum_{c,p,q} w[o,c,p,q] x[n,c,i*s+p*d-pad, j*s+q*d-pad]."""
    N, C, H, W = x.shape
    O, _, kh, kw = w.shape
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    OH = (H + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    OW = (W + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    xp = np.zeros((N, C, H + 2 * ph, W + 2 * pw), x.dtype)
    xp[:, :, ph:ph + H, pw:pw + W] = x
    y = np.zeros((N, O, OH, OW), np.float64)
    for p in range(kh):
        for q in range(kw):
            patch = xp[:, :, p * dh:p * dh + sh * (OH - 1) + 1:sh, q * dw:q * dw + sw * (OW - 1) + 1:sw]
            y += np.einsum("nchw,oc->nohw", patch, w[:, :, p, q])
    if b is not None:
        y += b[None, :, None, None]
    return y


def pool2d(x, k, s, pad, mode):
    N, C, H, W = x.shape
    (kh, kw), (sh, sw), (ph, pw) = k, s, pad
    OH, OW = (H + 2 * ph - kh) // sh + 1, (W + 2 * pw - kw) // sw + 1
    fill = -np.inf if mode == "max" else 0.0
    xp = np.full((N, C, H + 2 * ph, W + 2 * pw), fill)
    xp[:, :, ph:ph + H, pw:pw + W] = x
    y = np.empty((N, C, OH, OW))
    for i in range(OH):
        for j in range(OW):
            win = xp[:, :, i * sh:i * sh + kh, j * sw:j * sw + kw]
            y[:, :, i, j] = win.max(axis=(2, 3)) if mode == "max" else win.sum(axis=(2, 3)) / (kh * kw)
    return y


def sigmoid(v):
    return 1 / (1 + np.exp(-v))


def lstm_cell(x_t, h, c, w_ih, w_hh, b_ih, b_hh):
    """One LSTM step, PyTorch's gate order i, f, g, o: returns (i, f, g, o, c, tanh(c), h)."""
    H = h.shape[1]
    a = x_t @ w_ih.T + h @ w_hh.T + b_ih + b_hh
    i, f, g, o = sigmoid(a[:, :H]), sigmoid(a[:, H:2 * H]), np.tanh(a[:, 2 * H:3 * H]), sigmoid(a[:, 3 * H:])
    c = f * c + i * g
    tc = np.tanh(c)
    return i, f, g, o, c, tc, o * tc


def lstm(x, weights, h0, c0):
    """x (T, N, I); weights: per layer (W_ih, W_hh, b_ih, b_hh); h0, c0 (L, N, H). Gates i, f, g, o."""
    out = x.astype(np.float64)
    hn, cn = [], []
    for k, (w_ih, w_hh, b_ih, b_hh) in enumerate(weights):
        h, c = h0[k].astype(np.float64), c0[k].astype(np.float64)
        ys = []
        for t in range(out.shape[0]):
            *_, c, _, h = lstm_cell(out[t], h, c, w_ih, w_hh, b_ih, b_hh)
            ys.append(h)
        out = np.stack(ys)
        hn.append(h)
        cn.append(c)
    return out, np.stack(hn), np.stack(cn)


def sgd(p, grads, lr, momentum=0.0, nesterov=False, weight_decay=0.0, dampening=0.0):
    """PyTorch's SGD applied for each gradient in `grads` in turn; returns the final parameter."""
    p = p.astype(np.float64).copy()
    buf = None
    for g in grads:
        g = g + weight_decay * p
        if momentum:
            buf = g.copy() if buf is None else momentum * buf + (1 - dampening) * g
            g = g + momentum * buf if nesterov else buf
        p = p - lr * g
    return p


def adam(p, grads, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False, decoupled=False, lrs=None):
    """PyTorch's Adam (decoupled=False) or AdamW (True) applied for each gradient in turn, in float64;
    lrs, if given, is the learning rate of each step (a schedule). Returns the final parameter."""
    beta1, beta2 = betas
    p = p.astype(np.float64).copy()
    m, v, vmax = np.zeros_like(p), np.zeros_like(p), np.zeros_like(p)
    for t, g in enumerate(grads, start=1):
        lr_t = lrs[t - 1] if lrs is not None else lr
        g = g.astype(np.float64)
        if decoupled:
            p = p * (1 - lr_t * weight_decay)
        else:
            g = g + weight_decay * p
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        vmax = np.maximum(vmax, v)
        vhat = (vmax if amsgrad else v) / (1 - beta2 ** t)
        p = p - lr_t * (m / (1 - beta1 ** t)) / (np.sqrt(vhat) + eps)
    return p


def batchnorm_train(x, gamma, beta, eps=1e-5):
    """PyTorch's BatchNorm in training mode on x (N, C, ...): (y, batch mean, biased var, unbiased var)."""
    x = x.astype(np.float64)
    axes = (0,) + tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    mean, var = x.mean(axis=axes), x.var(axis=axes)
    m = x.size // x.shape[1]
    y = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps)
    if gamma is not None:
        y = y * gamma.reshape(shape) + beta.reshape(shape)
    return y, mean, var, var * m / (m - 1)


def batchnorm_eval(x, gamma, beta, running_mean, running_var, eps=1e-5):
    shape = (1, -1) + (1,) * (x.ndim - 2)
    y = (x.astype(np.float64) - running_mean.reshape(shape)) / np.sqrt(running_var.reshape(shape) + eps)
    return y * gamma.reshape(shape) + beta.reshape(shape) if gamma is not None else y


# -- layers with forward and backward ----------------------------------------------------------------
class NpConv2d:
    """Cross-correlation via im2col; w (C_out, C_in, kh, kw), b (C_out,)."""

    def __init__(self, w, b, stride, padding):
        self.w, self.b, self.s, self.p = w, b, stride, padding
        self.params = {"weight": w, "bias": b} if b is not None else {"weight": w}

    def forward(self, x):
        # x: (N, C, H, W) -> y: (N, C_out, OH, OW); keeps the columns for dW and the input shape
        (sh, sw), (ph, pw) = self.s, self.p
        co, ci, kh, kw = self.w.shape
        xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
        win = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(2, 3))[:, :, ::sh, ::sw]
        N, _, OH, OW = win.shape[:4]
        self.cols = win.transpose(0, 2, 3, 1, 4, 5).reshape(N * OH * OW, ci * kh * kw)
        self.shape = (x.shape, xp.shape, OH, OW)
        y = self.cols @ self.w.reshape(co, -1).T
        if self.b is not None:
            y += self.b
        return y.reshape(N, OH, OW, co).transpose(0, 3, 1, 2)

    def backward(self, dy):
        (xs, xps, OH, OW), (sh, sw), (ph, pw) = self.shape, self.s, self.p
        co, ci, kh, kw = self.w.shape
        N = xs[0]
        # y = cols W^T + b  =>  dW = dy^T cols, db = sum dy, dcols = dy W
        d2 = dy.transpose(0, 2, 3, 1).reshape(-1, co)
        self.grads = {"weight": (d2.T @ self.cols).reshape(self.w.shape)}
        if self.b is not None:
            self.grads["bias"] = d2.sum(0)
        dcols = (d2 @ self.w.reshape(co, -1)).reshape(N, OH, OW, ci, kh, kw)
        dxp = np.zeros(xps, dy.dtype)
        for i in range(kh):
            for j in range(kw):
                dxp[:, :, i:i + sh * OH:sh, j:j + sw * OW:sw] += dcols[:, :, :, :, i, j].transpose(0, 3, 1, 2)
        return dxp[:, :, ph:ph + xs[2], pw:pw + xs[3]]


class NpMaxPool2d:
    """Non-overlapping windows (kernel == stride, no padding), the case the digits CNN uses."""

    def __init__(self, k):
        self.k = k
        self.params = {}

    def forward(self, x):
        N, C, H, W = x.shape
        k = self.k
        OH, OW = H // k, W // k
        win = x[:, :, :OH * k, :OW * k].reshape(N, C, OH, k, OW, k).transpose(0, 1, 2, 4, 3, 5)
        win = win.reshape(N, C, OH, OW, k * k)
        self.arg, self.xshape = win.argmax(-1), x.shape
        return win.max(-1)

    def backward(self, dy):
        N, C, H, W = self.xshape
        k, (OH, OW) = self.k, dy.shape[2:]
        # y = x[argmax]  =>  the gradient goes to the argmax of each window only
        dwin = np.zeros((N, C, OH, OW, k * k), dy.dtype)
        np.put_along_axis(dwin, self.arg[..., None], dy[..., None], -1)
        dx = np.zeros(self.xshape, dy.dtype)
        dwin = dwin.reshape(N, C, OH, OW, k, k).transpose(0, 1, 2, 4, 3, 5)
        dx[:, :, :OH * k, :OW * k] = dwin.reshape(N, C, OH * k, OW * k)
        return dx


class NpDense:
    def __init__(self, w, b):
        self.w, self.b = w, b
        self.params = {"weight": w, "bias": b} if b is not None else {"weight": w}

    def forward(self, x):
        self.x = x  # kept for dW = dy^T x
        return x @ self.w.T + (self.b if self.b is not None else 0)

    def backward(self, dy):
        self.grads = {"weight": dy.T @ self.x}
        if self.b is not None:
            self.grads["bias"] = dy.sum(0)
        return dy @ self.w


class NpAct:
    def __init__(self, kind):
        self.kind, self.params = kind, {}

    def forward(self, x):
        self.y = {"relu": lambda: np.maximum(x, 0), "tanh": lambda: np.tanh(x),
                  "sigmoid": lambda: sigmoid(x)}[self.kind]()
        return self.y

    def backward(self, dy):
        y = self.y
        return dy * {"relu": lambda: y > 0, "tanh": lambda: 1 - y * y, "sigmoid": lambda: y * (1 - y)}[self.kind]()


class NpFlatten:
    params = {}

    def forward(self, x):
        self.shape = x.shape
        return x.reshape(x.shape[0], -1)

    def backward(self, dy):
        return dy.reshape(self.shape)


class NpIdentity:  # Dropout with p = 0
    params = {}

    def forward(self, x):
        return x

    def backward(self, dy):
        return dy


class NpLSTM:
    """One layer, PyTorch's gate order (i, f, g, o); the output is h_T (the classifier's input)."""

    KEYS = ("lstm.weight_ih_l0", "lstm.weight_hh_l0", "lstm.bias_ih_l0", "lstm.bias_hh_l0")

    def __init__(self, w):
        self.params = {k: w[k] for k in self.KEYS}  # nn's names (the wrapper's child is `lstm`)

    def forward(self, x):
        # x: (T, N, I) -> h_T: (N, H); keeps every step's gates, cells and previous h
        w_ih, w_hh, b_ih, b_hh = (self.params[k] for k in self.KEYS)
        T, N, _ = x.shape
        H = w_hh.shape[1]
        h, c = np.zeros((N, H), x.dtype), np.zeros((N, H), x.dtype)
        self.x, self.steps = x, []
        for t in range(T):
            c_prev, h_prev = c, h
            i, f, g, o, c, tc, h = lstm_cell(x[t], h, c, w_ih, w_hh, b_ih, b_hh)
            self.steps.append((i, f, g, o, c_prev, tc, h_prev))
        return h

    def backward(self, dh):
        w_ih, w_hh = self.params[self.KEYS[0]], self.params[self.KEYS[1]]
        dw_ih, dw_hh, db = np.zeros_like(w_ih), np.zeros_like(w_hh), np.zeros(w_ih.shape[0], w_ih.dtype)
        dc = np.zeros_like(dh)
        dx = np.zeros_like(self.x)
        for t in reversed(range(len(self.steps))):
            i, f, g, o, c_prev, tc, h_prev = self.steps[t]
            # h = o tanh(c), c = f c_prev + i g: the chain rule through each gate's nonlinearity
            dc = dc + dh * o * (1 - tc * tc)
            da = np.concatenate([dc * g * i * (1 - i), dc * c_prev * f * (1 - f), dc * i * (1 - g * g),
                                 dh * tc * o * (1 - o)], axis=1)
            # a = x W_ih^T + h_prev W_hh^T + b_ih + b_hh
            dw_ih += da.T @ self.x[t]
            dw_hh += da.T @ h_prev
            db += da.sum(0)
            dx[t] = da @ w_ih
            dh, dc = da @ w_hh, dc * f
        self.grads = dict(zip(self.KEYS, (dw_ih, dw_hh, db, db.copy())))
        return dx


def np_softmax_xent(logits, labels):
    """(mean loss, dL/dlogits)."""
    z = logits - logits.max(1, keepdims=True)
    e = np.exp(z)
    prob = e / e.sum(1, keepdims=True)
    n = len(labels)
    loss = -np.log(prob[np.arange(n), labels]).mean()
    prob[np.arange(n), labels] -= 1
    return float(loss), prob / n


class NpModel:
    """A NumPy model of reference layers [(name, layer)], trained with softmax cross-entropy and SGD
    with momentum (PyTorch's update, no dampening): the twin of an nn model in the train benchmark."""

    def __init__(self, layers, lr, momentum):
        self.layers, self.lr, self.momentum = layers, lr, momentum
        self.velocity = {}

    def step(self, x, labels, timer=None):
        """zero_grad + forward + loss + backward + SGD (momentum); timer(name) marks segment ends."""
        mark = timer or (lambda name: None)
        mark("start")
        for name, layer in self.layers:
            x = layer.forward(x)
            mark(f"{name} fwd")
        loss, dy = np_softmax_xent(x, labels)
        mark("loss")
        for name, layer in reversed(self.layers):
            dy = layer.backward(dy)
            mark(f"{name} bwd")
        for name, layer in self.layers:
            for k, w in layer.params.items():
                v = self.velocity.setdefault((name, k), None)
                g = layer.grads[k]
                v = g.copy() if v is None else self.momentum * v + g
                self.velocity[(name, k)] = v
                w -= self.lr * v
        mark("optimizer")
        return loss

    def grads(self):
        return {f"{name}.{k}": layer.grads[k] for name, layer in self.layers for k in layer.params}
