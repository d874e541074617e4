// k-means assignment step: each point is labelled with its nearest centroid, and cluster
// populations are counted with integer atomics.
//
// Tiny 32-thread blocks (one warp) are limited by thread-block slots, not warps. Each block
// copies the centroids into shared memory; the squared distance is a __noinline__ device
// function taking generic pointers (one into global, one into shared memory), so the PTX has a
// .func and call sites. Coordinates are multiples of 1/8 in [-8, 8), which makes every
// distance exact in f32 whether or not the compiler fuses multiply-adds, so labels are exact.
// Ties go to the lower centroid index.

#define MAX_K 32
#define MAX_D 8

__device__ __noinline__ float dist2(const float* p, const float* c, int d)
{
    float s = 0.0f;
    for (int j = 0; j < d; ++j) {
        float diff = p[j] - c[j];
        s += diff * diff;
    }
    return s;
}

extern "C" __global__ void kmeans_assign(const float* __restrict__ points,
                                         const float* __restrict__ centroids,
                                         int* __restrict__ labels,
                                         unsigned* __restrict__ counts,
                                         int n, int k, int d)
{
    __shared__ float cs[MAX_K * MAX_D];

    for (int i = threadIdx.x; i < k * d; i += blockDim.x) {
        cs[i] = centroids[i];
    }
    __syncthreads();

    int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n) {
        return;
    }
    const float* pt = points + p * d;
    int best = 0;
    float best_d = dist2(pt, cs, d);
    for (int c = 1; c < k; ++c) {
        float dc = dist2(pt, cs + c * d, d);
        if (dc < best_d) {
            best_d = dc;
            best = c;
        }
    }
    labels[p] = best;
    atomicAdd(&counts[best], 1u);
}
