// common.cuh: small device helpers shared by the kernel families.
#pragma once

// Grid size for a grid-stride loop over n elements with `block` threads per block, capped so that a
// huge n does not ask for more blocks than keep the device busy.
#define GRID_STRIDE_CAP 65535

__device__ __forceinline__ float sigmoidf_(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ double sigmoidf_(double x) { return 1.0 / (1.0 + exp(-x)); }
