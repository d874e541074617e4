// Tiled single-precision GEMM: C[M][N] = alpha * A[M][K] * B[K][N] + beta * C.
//
// 2-D thread block of TILE x TILE threads; each thread computes one element of C. The
// k-loop stages one TILE x TILE tile of A and of B in shared memory per iteration, with a
// barrier before and after the inner product: the classic "barrier inside a loop" shape.
// Row-major matrices; M, N, K are multiples of TILE (the host pads the problem).

#define TILE 16

extern "C" __global__ void gemm_tiled(const float* __restrict__ a,
                                      const float* __restrict__ b,
                                      float* __restrict__ c,
                                      int m, int n, int k,
                                      float alpha, float beta)
{
    __shared__ float as[TILE][TILE];
    __shared__ float bs[TILE][TILE];

    int tx = threadIdx.x;
    int ty = threadIdx.y;
    int row = blockIdx.y * TILE + ty;
    int col = blockIdx.x * TILE + tx;

    float acc = 0.0f;
    for (int k0 = 0; k0 < k; k0 += TILE) {
        as[ty][tx] = a[row * k + k0 + tx];
        bs[ty][tx] = b[(k0 + ty) * n + col];
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < TILE; ++kk) {
            acc += as[ty][kk] * bs[kk][tx];
        }
        __syncthreads();
    }
    if (row < m && col < n) {
        c[row * n + col] = alpha * acc + beta * c[row * n + col];
    }
}
