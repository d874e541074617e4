// Numerically stable softmax of the rows of an f32 matrix, as in the attention scores of a
// transformer: y_j = exp(x_j - max x) / sum_k exp(x_k - max x). Subtracting the row maximum
// first keeps every exponent <= 0, so rows whose values exceed expf's overflow threshold
// (~88.7) still give finite results; the host feeds such rows.
//
// One 256-thread TB per row, three passes: the row maximum; the exponentials, stored to y and
// summed; y scaled by 1/sum (one IEEE division per row, then multiplies, as real kernels do).
// Each reduction is a __shfl_xor_sync butterfly within the warps, the eight warp results in
// shared memory, a barrier, and a second butterfly that every warp runs over those eight
// values, so each thread ends with the total without a second broadcast barrier; a barrier
// after the read lets the next reduction reuse the shared array. expf is NVRTC's accurate
// sequence (no fast-math): range reduction with fma, ex2.approx.ftz and a scaling step.

#define FULL_MASK 0xffffffffu
#define WARP 32
#define MAX_WARPS 32
// -infinity by its bits: NVRTC has no <math.h>, hence no INFINITY.
#define NEG_INF __int_as_float(0xff800000)

struct MaxOp {
    __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct SumOp {
    __device__ float operator()(float a, float b) const { return a + b; }
};

template <typename Op>
__device__ __forceinline__ float warp_reduce(float v, Op op)
{
    for (int mask = WARP / 2; mask > 0; mask >>= 1) {
        v = op(v, __shfl_xor_sync(FULL_MASK, v, mask));
    }
    return v;
}

// The reduction of v over the TB, returned to every thread. `identity` pads the second
// butterfly when the TB has fewer than 32 warps.
template <typename Op>
__device__ __forceinline__ float block_reduce(float v, float* partials, Op op, float identity)
{
    unsigned lane = threadIdx.x % WARP;
    unsigned warp = threadIdx.x / WARP;
    unsigned nwarps = blockDim.x / WARP;
    v = warp_reduce(v, op);
    if (lane == 0) {
        partials[warp] = v;
    }
    __syncthreads();
    v = warp_reduce(lane < nwarps ? partials[lane] : identity, op);
    __syncthreads();
    return v;
}

extern "C" __global__ void softmax_rows(const float* __restrict__ x,
                                        float* __restrict__ y,
                                        int cols)
{
    __shared__ float partials[MAX_WARPS];
    const float* xr = x + (long long)blockIdx.x * cols;
    float* yr = y + (long long)blockIdx.x * cols;

    float m = NEG_INF;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) {
        m = fmaxf(m, xr[j]);
    }
    m = block_reduce(m, partials, MaxOp(), NEG_INF);

    float sum = 0.0f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) {
        float e = expf(xr[j] - m);
        yr[j] = e;
        sum += e;
    }
    sum = block_reduce(sum, partials, SumOp(), 0.0f);

    float inv = 1.0f / sum;
    // Each thread rescales the elements it wrote itself: no barrier needed.
    for (int j = threadIdx.x; j < cols; j += blockDim.x) {
        yr[j] *= inv;
    }
}
