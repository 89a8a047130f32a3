// optim.cu: optimizer updates and gradient clipping. `real` is the element type. Gradient norms use gpublas'
// dot (blas1.cu). Every hyperparameter a schedule or the step count changes lives in device memory, so
// a captured training step replays with the values of the moment:
//   state (double[4]) = [lr, t, step_size, bc2_sqrt]; the host writes lr (opt.lr = x), optim_tick the rest.
//
// optim_tick:   one thread, once per optimizer step before the updates: t += 1, and Adam's bias
//               corrections step_size = lr / (1 - beta1^t), bc2_sqrt = sqrt(1 - beta2^t) in double
//               (as PyTorch computes them on the host).
// sgd_update and adam_update load 16-bit parameters, gradients and state as float, compute in float and
// round once per stored value (the state, momentum buffers and moments, has the parameter's dtype, as
// PyTorch keeps it); hyperparameters are passed in the compute type.
// sgd_update:   grid-stride loop, one parameter element per thread; PyTorch's SGD in one pass:
//                 g = grad + weight_decay * p
//                 buf = t == 1 ? g : momentum * buf + (1 - dampening) * g     (only if momentum != 0)
//                 g = nesterov ? g + momentum * buf : buf                      (only if momentum != 0)
//                 p -= lr * g
//               buf may be null when momentum == 0.
// adam_update:  grid-stride loop, one parameter element per thread; PyTorch's Adam / AdamW in one pass:
//                 p *= 1 - lr * weight_decay                                  (AdamW: decoupled decay)
//                 g = grad + weight_decay * p                                 (Adam: L2 folded into g)
//                 m = lerp(m, g, 1 - beta1);  v = beta2 * v + (1 - beta2) * g * g
//                 vmax = max(vmax, v), used for v below                       (only with amsgrad)
//                 p -= step_size * m / (sqrt(v) / bc2_sqrt + eps)
//               vmax is null without amsgrad. lr, step_size and bc2_sqrt are rounded to the compute
//               type as kernel arguments would be.
// scale_inplace: grid-stride loop, one element per thread: x[i] *= s.
// clip_coef:    one thread: total = sqrt of the sum of the per-parameter sums of squares (float32 ones
//               and float64 ones, each summed in double in NumPy's pairwise order), then
//               clip = [total, total > max_norm ? max_norm / (total + 1e-6) : 1] (NaN: no clipping).
// clip_scale:   grid-stride loop, one element per thread: x[i] *= clip[1] (in the compute type, rounded
//               once), nothing when clip[1] == 1.
#include "common.cuh"

extern "C" __global__ void optim_tick(double* __restrict__ state, double beta1, double beta2) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    const double t = state[1] + 1.0;
    state[1] = t;
    state[2] = state[0] / (1.0 - pow(beta1, t));
    state[3] = sqrt(1.0 - pow(beta2, t));
}

extern "C" __global__ void sgd_update(real* __restrict__ p, const real* __restrict__ grad, real* __restrict__ buf,
                                      long long n, const double* __restrict__ state, compute_t<real> momentum,
                                      compute_t<real> dampening, compute_t<real> weight_decay, int nesterov) {
    const acc_real lr = (acc_real)state[0];
    const bool first = state[1] == 1.0;
    GRID_STRIDE_LOOP(long long, i, n) {
        const acc_real w = load_as(p[i]);
        acc_real g = load_as(grad[i]) + weight_decay * w;
        if (momentum != (acc_real)0) {
            const real b = convert<real>(first ? g : momentum * load_as(buf[i]) + ((acc_real)1 - dampening) * g);
            buf[i] = b;
            g = nesterov ? g + momentum * load_as(b) : load_as(b);
        }
        p[i] = convert<real>(w - lr * g);
    }
}

extern "C" __global__ void adam_update(real* __restrict__ p, const real* __restrict__ grad, real* __restrict__ m,
                                       real* __restrict__ v, real* __restrict__ vmax, long long n,
                                       const double* __restrict__ state, compute_t<real> beta1,
                                       compute_t<real> beta2, compute_t<real> eps, compute_t<real> weight_decay,
                                       int decoupled) {
    const acc_real lr = (acc_real)state[0], step_size = (acc_real)state[2], bc2_sqrt = (acc_real)state[3];
    GRID_STRIDE_LOOP(long long, i, n) {
        acc_real w = load_as(p[i]);
        acc_real g = load_as(grad[i]);
        if (decoupled) w *= (acc_real)1 - lr * weight_decay;
        else g += weight_decay * w;
        const acc_real m0 = load_as(m[i]);
        const real ms = convert<real>(m0 + ((acc_real)1 - beta1) * (g - m0));
        const real vs = convert<real>(beta2 * load_as(v[i]) + ((acc_real)1 - beta2) * (g * g));
        m[i] = ms;
        v[i] = vs;
        acc_real vi = load_as(vs);
        if (vmax) {
            vi = load_as(vmax[i]) > vi ? load_as(vmax[i]) : vi;
            vmax[i] = convert<real>(vi);
        }
        p[i] = convert<real>(w - step_size * (load_as(ms) / (sqrt(vi) / bc2_sqrt + eps)));
    }
}

extern "C" __global__ void scale_inplace(real* __restrict__ x, long long n, real s) {
    GRID_STRIDE_LOOP(long long, i, n)
        x[i] *= s;
}

// NumPy's pairwise summation (np.sum of a float64 array): blocks of up to 128 summed with 8 running
// partial sums, longer runs split in two (the first part a multiple of 8) and the halves added. The
// recursion is walked with an explicit stack: each frame is (start, n, stage), and stage 2 adds the two
// halves' values.
template <class T>
__device__ double pairwise_block(const T* a, long long n) {
    if (n < 8) {
        double res = -0.0;
        for (long long i = 0; i < n; ++i) res += (double)a[i];
        return res;
    }
    double r[8];
    for (int j = 0; j < 8; ++j) r[j] = (double)a[j];
    long long i = 8;
    for (; i < n - (n % 8); i += 8)
        for (int j = 0; j < 8; ++j) r[j] += (double)a[i + j];
    double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += (double)a[i];
    return res;
}

template <class T>
__device__ double pairwise_sum(const T* a, long long n) {
    long long start[64], len[64];
    int stage[64], sp = 0, vp = 0;
    double vals[64];
    start[0] = 0, len[0] = n, stage[0] = 0, sp = 1;
    while (sp > 0) {
        const int f = sp - 1;
        if (len[f] <= 128) {
            vals[vp++] = pairwise_block(a + start[f], len[f]);
            --sp;
            continue;
        }
        long long n2 = len[f] / 2;
        n2 -= n2 % 8;
        if (stage[f] == 2) {
            vp -= 1;
            vals[vp - 1] = vals[vp - 1] + vals[vp];
            --sp;
            continue;
        }
        const int first_half = stage[f] == 0;
        stage[f] += 1;
        start[sp] = first_half ? start[f] : start[f] + n2;
        len[sp] = first_half ? n2 : len[f] - n2;
        stage[sp] = 0;
        ++sp;
    }
    return vals[0];
}

extern "C" __global__ void clip_coef(const float* __restrict__ sums32, long long n32, const double* __restrict__ sums64,
                                     long long n64, double max_norm, double* __restrict__ clip) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    double sq = 0.0;
    if (n32) sq += pairwise_sum(sums32, n32);
    if (n64) sq += pairwise_sum(sums64, n64);
    const double total = sqrt(sq);
    clip[0] = total;
    clip[1] = total > max_norm ? max_norm / (total + 1e-6) : 1.0;
}

extern "C" __global__ void clip_scale(real* __restrict__ x, long long n, const double* __restrict__ clip) {
    if (clip[1] == 1.0) return;
    const acc_real s = (acc_real)clip[1];
    GRID_STRIDE_LOOP(long long, i, n)
        x[i] = convert<real>(load_as(x[i]) * s);
}
