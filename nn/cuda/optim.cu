// optim.cu: optimizer updates. `real` is the element type. Gradient norms use gpublas' dot (blas1.cu).
//
// sgd_update:   grid-stride loop, one parameter element per thread; PyTorch's SGD in one pass:
//                 g = grad + weight_decay * p
//                 buf = first ? g : momentum * buf + (1 - dampening) * g      (only if momentum != 0)
//                 g = nesterov ? g + momentum * buf : buf                      (only if momentum != 0)
//                 p -= lr * g
//               buf may be null when momentum == 0.
// adam_update:  grid-stride loop, one parameter element per thread; PyTorch's Adam / AdamW in one pass:
//                 p *= 1 - lr * weight_decay                                  (AdamW: decoupled decay)
//                 g = grad + weight_decay * p                                 (Adam: L2 folded into g)
//                 m = lerp(m, g, 1 - beta1);  v = beta2 * v + (1 - beta2) * g * g
//                 vmax = max(vmax, v), used for v below                       (only with amsgrad)
//                 p -= step_size * m / (sqrt(v) / bc2_sqrt + eps)
//               step_size = lr / (1 - beta1^t) and bc2_sqrt = sqrt(1 - beta2^t) come from the host
//               (computed in double, as PyTorch does); vmax is null without amsgrad.
// scale_inplace: grid-stride loop, one element per thread: x[i] *= s.
#include "common.cuh"

extern "C" __global__ void sgd_update(real* __restrict__ p, const real* __restrict__ grad, real* __restrict__ buf,
                                      long long n, real lr, real momentum, real dampening, real weight_decay,
                                      int nesterov, int first) {
    GRID_STRIDE_LOOP(long long, i, n) {
        real g = grad[i] + weight_decay * p[i];
        if (momentum != (real)0) {
            real b = first ? g : momentum * buf[i] + ((real)1 - dampening) * g;
            buf[i] = b;
            g = nesterov ? g + momentum * b : b;
        }
        p[i] -= lr * g;
    }
}

extern "C" __global__ void adam_update(real* __restrict__ p, const real* __restrict__ grad, real* __restrict__ m,
                                       real* __restrict__ v, real* __restrict__ vmax, long long n, real lr,
                                       real beta1, real beta2, real eps, real weight_decay, int decoupled,
                                       real step_size, real bc2_sqrt) {
    GRID_STRIDE_LOOP(long long, i, n) {
        real w = p[i];
        real g = grad[i];
        if (decoupled) w *= (real)1 - lr * weight_decay;
        else g += weight_decay * w;
        const real mi = m[i] + ((real)1 - beta1) * (g - m[i]);
        real vi = beta2 * v[i] + ((real)1 - beta2) * (g * g);
        m[i] = mi;
        v[i] = vi;
        if (vmax) {
            vi = vmax[i] > vi ? vmax[i] : vi;
            vmax[i] = vi;
        }
        p[i] = w - step_size * (mi / (sqrt(vi) / bc2_sqrt + eps));
    }
}

extern "C" __global__ void scale_inplace(real* __restrict__ x, long long n, real s) {
    GRID_STRIDE_LOOP(long long, i, n)
        x[i] *= s;
}
