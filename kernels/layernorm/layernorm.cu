// Layer normalisation of the rows of an f32 matrix, the step before every attention and MLP
// block of a transformer: y = (x - mean) / sqrt(var + eps) * gamma + beta, with mean and
// variance over each row and gamma, beta per column. Like training frameworks, it also writes
// each row's mean and 1/sqrt(var + eps), which the backward pass reuses.
//
// One warp per row, four rows per 128-thread TB. Lanes read the row as float4s strided by the
// warp (ld.global.nc.v4.f32, 512 contiguous bytes per warp load), and the warp's partial sums
// meet in __shfl_xor_sync butterflies that leave the total in every lane: no shared memory and
// no barrier. The statistics take two passes over the row (the mean, then the squared
// deviations from it) instead of E[x^2] - mean^2, which cancels catastrophically when the mean
// is large against the spread; the second and third passes re-read the row, from the caches
// in practice. rsqrtf is the hardware approximation (rsqrt.approx), as in real layer norms.
//
// cols must be a multiple of 128 (one float4 per lane per step) and the arrays 16-byte
// aligned.

#define FULL_MASK 0xffffffffu
#define WARP 32

// Butterfly sum: after log2(32) steps every lane holds the sum of all 32 lanes' values.
__device__ __forceinline__ float warp_sum(float v)
{
    for (int mask = WARP / 2; mask > 0; mask >>= 1) {
        v += __shfl_xor_sync(FULL_MASK, v, mask);
    }
    return v;
}

extern "C" __global__ void layernorm_rows(const float* __restrict__ x,
                                          const float* __restrict__ gamma,
                                          const float* __restrict__ beta,
                                          float* __restrict__ y,
                                          float* __restrict__ mean_out,
                                          float* __restrict__ rstd_out,
                                          int rows, int cols, float eps)
{
    int row = blockIdx.x * (blockDim.x / WARP) + threadIdx.x / WARP;
    int lane = threadIdx.x % WARP;
    // The whole warp shares a row, so it leaves together and the shuffles below always see
    // all 32 lanes.
    if (row >= rows) {
        return;
    }
    int n4 = cols / 4;
    const float4* xr = reinterpret_cast<const float4*>(x + (long long)row * cols);
    float4* yr = reinterpret_cast<float4*>(y + (long long)row * cols);
    const float4* g4 = reinterpret_cast<const float4*>(gamma);
    const float4* b4 = reinterpret_cast<const float4*>(beta);

    float sum = 0.0f;
    for (int j = lane; j < n4; j += WARP) {
        float4 v = xr[j];
        sum += (v.x + v.y) + (v.z + v.w);
    }
    float mean = warp_sum(sum) / cols;

    float sq = 0.0f;
    for (int j = lane; j < n4; j += WARP) {
        float4 v = xr[j];
        float dx = v.x - mean, dy = v.y - mean, dz = v.z - mean, dw = v.w - mean;
        sq += (dx * dx + dy * dy) + (dz * dz + dw * dw);
    }
    float rstd = rsqrtf(warp_sum(sq) / cols + eps);

    for (int j = lane; j < n4; j += WARP) {
        float4 v = xr[j], g = g4[j], b = b4[j];
        float4 out;
        out.x = (v.x - mean) * rstd * g.x + b.x;
        out.y = (v.y - mean) * rstd * g.y + b.y;
        out.z = (v.z - mean) * rstd * g.z + b.z;
        out.w = (v.w - mean) * rstd * g.w + b.w;
        yr[j] = out;
    }
    if (lane == 0) {
        mean_out[row] = mean;
        rstd_out[row] = rstd;
    }
}
