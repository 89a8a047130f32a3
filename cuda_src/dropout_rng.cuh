// dropout_rng.cuh: the counter-based generator behind nn's dropout, one idea in one place: nn/cuda/dropout.cu
// (nn.Dropout) and the fused attention's dropout (nn/cuda/attention.cu, attention_half.cu) draw from it.
// Element `counter` of a draw keyed by `seed` is kept when the top 24 bits of splitmix64(seed, counter), as a
// fraction of 2^24, are >= p: a pure function of (seed, counter), so no mask need be stored: the attention's
// backward regenerates its forward's mask tile by tile, in any thread order. The attention numbers element
// (bh, i, j) of its (B H, Tq, Tk) probabilities offset + (bh Tq + i) Tk + j, as dropout_forward numbers a
// contiguous (B, H, Tq, Tk) array: the same seed and offset give the unfused path's mask bit for bit.
#pragma once

__device__ __forceinline__ unsigned long long dropout_hash(unsigned long long seed, unsigned long long counter) {
    // splitmix64 of the counter, keyed by the seed (a different stream per seed)
    unsigned long long z = counter * 0x9E3779B97F4A7C15ULL + seed * 0xD1B54A32D192ED03ULL + 0x632BE59BD9B4E019ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

// Whether element `counter` of the draw keyed by `seed` survives a dropout of probability p.
__device__ __forceinline__ bool dropout_keep(unsigned long long seed, unsigned long long counter, float p) {
    const float u = (float)(dropout_hash(seed, counter) >> 40) * (1.0f / 16777216.0f);  // [0, 1)
    return u >= p;
}
