"""NumPy references for nn's tests: direct-loop convolution and pooling, an LSTM, PyTorch's SGD."""
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


def lstm(x, weights, h0, c0):
    """x (T, N, I); weights: per layer (W_ih, W_hh, b_ih, b_hh); h0, c0 (L, N, H). Gates i, f, g, o."""
    out = x.astype(np.float64)
    hn, cn = [], []
    for k, (w_ih, w_hh, b_ih, b_hh) in enumerate(weights):
        h, c = h0[k].astype(np.float64), c0[k].astype(np.float64)
        H = h.shape[1]
        ys = []
        for t in range(out.shape[0]):
            a = out[t] @ w_ih.T + h @ w_hh.T + b_ih + b_hh
            i, f, g, o = sigmoid(a[:, :H]), sigmoid(a[:, H:2 * H]), np.tanh(a[:, 2 * H:3 * H]), sigmoid(a[:, 3 * H:])
            c = f * c + i * g
            h = o * np.tanh(c)
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
