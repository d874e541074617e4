// Tensor-core GEMM through the WMMA API: C[M][N] = alpha * A[M][K] * B[K][N] + beta * C, with
// A row-major f16, B column-major f16 (stored as N rows of K halves) and C row-major f32.
// targets: sm_80 sm_90
//
// What it models: the first generation of tensor-core code (CUDA 9 style), where the warp
// hands whole 16x16 tiles to the tensor cores and never sees the per-thread fragment layout.
// Only the m16n16k16 shape with f16 inputs and f32 accumulators is used.
//
// 128 threads (4 warps) per TB compute a 64x64 tile of C; each warp owns a 32x32 quarter,
// i.e. 2x2 accumulator fragments. The k-loop stages a 64x32 tile of A and of B in shared
// memory with 16-byte loads between two barriers (the classic synchronous shape, no
// pipelining: `mgemm` is the asynchronous counterpart), then each warp issues
// wmma.load.a/b from shared memory and 2x2x2 wmma.mma per tile. The epilogue reads the old C
// with wmma.load.c from global memory, scales element-wise (legal whatever the hidden layout,
// because both fragments share it) and writes with wmma.store.d.
//
// M and N are multiples of 64 and K of 32 (the host pads the problem).

#include <mma.h>
#include <cuda_fp16.h>

using namespace nvcuda;

#define BM 64
#define BN 64
#define BK 32
// Shared rows are padded by 8 halves (80 bytes instead of 64): the 16-byte stores of
// consecutive rows then start in different banks, and the leading dimension stays a
// multiple of 8 halves, as wmma.load requires for f16.
#define LDS (BK + 8)
#define THREADS 128

// Copies a 64-row x 32-half tile (rows `ld` halves apart in global memory) into shared
// memory, 16 bytes per copy, two copies per thread.
__device__ __forceinline__ void stage_tile(half* dst, const half* src, int ld, int tid)
{
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        int chunk = tid + i * THREADS;
        int row = chunk >> 2;
        int col = (chunk & 3) * 8;
        *reinterpret_cast<uint4*>(dst + row * LDS + col) =
            *reinterpret_cast<const uint4*>(src + (size_t)row * ld + col);
    }
}

extern "C" __global__ void __launch_bounds__(THREADS)
wgemm_f16(const half* __restrict__ a, const half* __restrict__ b, float* __restrict__ c,
          int m, int n, int k, float alpha, float beta)
{
    // wmma.load needs 256-bit aligned tile origins: every origin used below is a multiple of
    // 16 rows (1280 bytes) and 16 columns (32 bytes) from these bases.
    __shared__ __align__(32) half as[BM * LDS];
    __shared__ __align__(32) half bs[BN * LDS];

    int tid = threadIdx.x;
    int warp = tid >> 5;
    int wm = (warp >> 1) * 32;  // the warp's rows within the TB tile
    int wn = (warp & 1) * 32;   // and its columns
    int row0 = blockIdx.y * BM;
    int col0 = blockIdx.x * BN;

    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j)
            wmma::fill_fragment(acc[i][j], 0.0f);

    for (int k0 = 0; k0 < k; k0 += BK) {
        stage_tile(as, a + (size_t)row0 * k + k0, k, tid);
        // Column-major B: column n of B is a contiguous row of K halves, so the tile of B
        // is staged exactly like A's, as BN rows of BK.
        stage_tile(bs, b + (size_t)col0 * k + k0, k, tid);
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa[2];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> fb[2];
#pragma unroll
            for (int i = 0; i < 2; ++i)
                wmma::load_matrix_sync(fa[i], as + (wm + i * 16) * LDS + kk, LDS);
#pragma unroll
            for (int j = 0; j < 2; ++j)
                wmma::load_matrix_sync(fb[j], bs + (wn + j * 16) * LDS + kk, LDS);
#pragma unroll
            for (int i = 0; i < 2; ++i)
#pragma unroll
                for (int j = 0; j < 2; ++j)
                    wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
        }
        // The next iteration overwrites the tiles the other warps may still be reading.
        __syncthreads();
    }

#pragma unroll
    for (int i = 0; i < 2; ++i) {
#pragma unroll
        for (int j = 0; j < 2; ++j) {
            float* tile = c + (size_t)(row0 + wm + i * 16) * n + col0 + wn + j * 16;
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> old;
            wmma::load_matrix_sync(old, tile, n, wmma::mem_row_major);
#pragma unroll
            for (int e = 0; e < old.num_elements; ++e)
                old.x[e] = alpha * acc[i][j].x[e] + beta * old.x[e];
            wmma::store_matrix_sync(tile, old, n, wmma::mem_row_major);
        }
    }
}
