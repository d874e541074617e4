// Sum reduction with warp shuffles, plus a vote-based count of elements above a threshold.
//
// Large 512-thread blocks with few registers and little shared memory: occupancy is limited by
// warp slots. Each thread accumulates a grid-stride slice; the loop bound is uniform across the
// block so every lane of a warp takes part in each __ballot_sync, whose mask is counted with
// __popc. Warps reduce with __shfl_down_sync, the per-warp sums meet in shared memory and the
// first warp finishes with __shfl_xor_sync. The host launches the same kernel a second time,
// with one block, over the per-block partial sums.

#define FULL_MASK 0xffffffffu
#define MAX_WARPS 32

extern "C" __global__ void reduce_sum(const float* __restrict__ in, int n,
                                      float* __restrict__ partial,
                                      float threshold,
                                      unsigned* __restrict__ count)
{
    __shared__ float warp_sums[MAX_WARPS];

    unsigned lane = threadIdx.x & 31;
    unsigned warp = threadIdx.x >> 5;
    unsigned nwarps = blockDim.x >> 5;

    float sum = 0.0f;
    unsigned above = 0;
    int stride = gridDim.x * blockDim.x;
    for (int base = blockIdx.x * blockDim.x; base < n; base += stride) {
        int i = base + threadIdx.x;
        float x = i < n ? in[i] : 0.0f;
        unsigned votes = __ballot_sync(FULL_MASK, i < n && x > threshold);
        above += __popc(votes);
        sum += x;
    }

    for (int offset = 16; offset > 0; offset >>= 1) {
        sum += __shfl_down_sync(FULL_MASK, sum, offset);
    }
    if (lane == 0) {
        warp_sums[warp] = sum;
        // Every lane of the warp counted the same votes; one adds them.
        atomicAdd(count, above);
    }
    __syncthreads();

    if (warp == 0) {
        float s = lane < nwarps ? warp_sums[lane] : 0.0f;
        for (int mask = 16; mask > 0; mask >>= 1) {
            s += __shfl_xor_sync(FULL_MASK, s, mask);
        }
        if (lane == 0) {
            partial[blockIdx.x] = s;
        }
    }
}
