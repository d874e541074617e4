// Multi-stage pipelined tensor-core GEMM as today's libraries write it:
// C[M][N] = A[M][K] * B[K][N], A and B row-major f16, C row-major f32.
// targets: sm_80 sm_90
//
// What it models: the Ampere-style main loop. Tiles travel global -> shared memory with
// asynchronous copies (cp.async.cg, 16 bytes each, bypassing L1) into a ring of three stages,
// so two tiles are in flight while the warps compute on the third; cp.async.commit_group
// closes a stage's group and cp.async.wait_group 1 waits for the oldest one. Warps then move
// operands shared -> registers with ldmatrix (.x4; .trans for B, which is stored k-major) and
// multiply with mma.sync m16n8k16 (f16 inputs, f32 accumulators), whose per-thread fragment
// layout the code handles explicitly (PTX ISA, "Matrix Fragments for mma.m16n8k16").
//
// 128 threads (4 warps, 2x2) per TB compute a 64x64 tile of C; each warp owns 32x32, i.e.
// 2 (m16) x 4 (n8) accumulator tiles, 32 f32 registers per thread. One barrier per k-tile.
// M and N are multiples of 64; K is a multiple of 8 (one 16-byte chunk) but not necessarily
// of the 32-wide k-tile: chunks past K are zero-filled by cp.async's src-size operand.

#include <cuda_fp16.h>

#define BM 64
#define BN 64
#define BK 32
#define STAGES 3
#define THREADS 128
// Shared rows padded by 8 halves: A rows are 80 bytes and B rows 144 bytes, so the eight
// 16-byte rows one ldmatrix phase reads fall in eight distinct groups of four banks. Both
// remain multiples of 16 bytes, as cp.async (16-byte copies) and ldmatrix (row addresses)
// require.
#define A_LD (BK + 8)
#define B_LD (BN + 8)

// The 32-bit shared-window address that cp.async and ldmatrix take.
__device__ __forceinline__ unsigned smem_addr(const void* p)
{
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// 16-byte asynchronous copy; the bytes past `src_bytes` (0 or 16 here) are zero-filled.
__device__ __forceinline__ void cp_async16(unsigned dst, const void* src, int src_bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(dst), "l"(src), "r"(src_bytes) : "memory");
}

__device__ __forceinline__ void cp_async_commit()
{
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

// Waits until at most `pending` of this thread's committed groups are still in flight.
template <int pending>
__device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" :: "n"(pending) : "memory");
}

// Four 8x8 b16 matrices; lanes 8i..8i+7 give the row addresses of matrix i, and register i
// of every lane receives its two elements of matrix i. `volatile` because the asm reads
// shared memory the compiler cannot see: it must not move across barriers or be merged.
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], unsigned addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], unsigned addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

// d += a * b for one 16x8x16 tile.
__device__ __forceinline__ void mma_16816(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                          unsigned b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Issues the copies of k-tile `k0` into one stage: A is 64 rows x 4 chunks, B 32 rows x 8
// chunks, two chunks of each per thread.
__device__ __forceinline__ void load_stage(half* as, half* bs, const half* a, const half* b,
                                           int row0, int col0, int k0, int n, int k, int tid)
{
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        int chunk = tid + i * THREADS;
        int row = chunk >> 2;
        int kc = k0 + (chunk & 3) * 8;
        bool in = kc < k;
        // A skipped chunk still needs a valid address; zero bytes are read from it.
        const half* src = in ? a + (size_t)(row0 + row) * k + kc : a;
        cp_async16(smem_addr(as + row * A_LD + (chunk & 3) * 8), src, in ? 16 : 0);
    }
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        int chunk = tid + i * THREADS;
        int kr = chunk >> 3;
        int nc = (chunk & 7) * 8;
        bool in = k0 + kr < k;
        const half* src = in ? b + (size_t)(k0 + kr) * n + col0 + nc : b;
        cp_async16(smem_addr(bs + kr * B_LD + nc), src, in ? 16 : 0);
    }
}

extern "C" __global__ void __launch_bounds__(THREADS)
mgemm_f16(const half* __restrict__ a, const half* __restrict__ b, float* __restrict__ c,
          int m, int n, int k)
{
    __shared__ __align__(128) half as[STAGES][BM * A_LD];
    __shared__ __align__(128) half bs[STAGES][BK * B_LD];

    int tid = threadIdx.x;
    int lane = tid & 31;
    int warp = tid >> 5;
    int wm = (warp >> 1) * 32;
    int wn = (warp & 1) * 32;
    int row0 = blockIdx.y * BM;
    int col0 = blockIdx.x * BN;
    int ktiles = (k + BK - 1) / BK;

    float acc[2][4][4];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                acc[i][j][e] = 0.0f;

    // Prologue: fill all stages but one. A group is committed even when there is no tile
    // left, so that "wait until one group is pending" always means "the oldest tile is in".
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < ktiles)
            load_stage(as[s], bs[s], a, b, row0, col0, s * BK, n, k, tid);
        cp_async_commit();
    }

    // ldmatrix row addresses: lanes 0-15 point at rows 0-15 of a 16-row slab, lanes 16-31
    // at the same rows 8 halves further on, so the four matrices are (rows 0-7 | 8-15) x
    // (columns 0-7 | 8-15) in the order the fragments want them.
    int lrow = lane & 15;
    int lcol = (lane >> 4) * 8;

    for (int kt = 0; kt < ktiles; ++kt) {
        cp_async_wait<STAGES - 2>();
        // Every thread's copies of tile kt have landed, and every warp is done with the
        // stage the copies below overwrite (it was computed on in iteration kt - 1).
        __syncthreads();
        int next = kt + STAGES - 1;
        if (next < ktiles)
            load_stage(as[next % STAGES], bs[next % STAGES], a, b, row0, col0, next * BK, n, k,
                       tid);
        cp_async_commit();

        const half* at = as[kt % STAGES];
        const half* bt = bs[kt % STAGES];
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            // A fragments straight from row-major A: matrix 0 = rows 0-7 / k 0-7 (a0,a1),
            // 1 = rows 8-15 / k 0-7 (a2,a3), 2 = rows 0-7 / k 8-15 (a4,a5), 3 = rows 8-15 /
            // k 8-15 (a6,a7).
            unsigned af[2][4];
#pragma unroll
            for (int i = 0; i < 2; ++i)
                ldmatrix_x4(af[i], smem_addr(at + (wm + i * 16 + lrow) * A_LD + kk + lcol));
            // B is k-major in shared memory, the mma wants it n-major ("col"): .trans gives
            // each lane the k-pair of one column. Matrices: k 0-7 / n 0-7 (b0,b1 of tile
            // 2jp), k 8-15 / n 0-7 (b2,b3), then the same for n 8-15 (tile 2jp+1).
            unsigned bf[4][2];
#pragma unroll
            for (int jp = 0; jp < 2; ++jp) {
                unsigned r[4];
                ldmatrix_x4_trans(r, smem_addr(bt + (kk + lrow) * B_LD + wn + jp * 16 + lcol));
                bf[2 * jp][0] = r[0];
                bf[2 * jp][1] = r[1];
                bf[2 * jp + 1][0] = r[2];
                bf[2 * jp + 1][1] = r[3];
            }
#pragma unroll
            for (int i = 0; i < 2; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    mma_16816(acc[i][j], af[i], bf[j][0], bf[j][1]);
        }
    }

    // Accumulator layout: c0,c1 are row lane/4, columns 2*(lane%4) and +1; c2,c3 the same
    // eight rows further down.
    int crow = row0 + wm + (lane >> 2);
    int ccol = col0 + wn + (lane & 3) * 2;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            float* p = c + (size_t)(crow + i * 16) * n + ccol + j * 8;
            *reinterpret_cast<float2*>(p) = make_float2(acc[i][j][0], acc[i][j][1]);
            *reinterpret_cast<float2*>(p + 8 * (size_t)n) = make_float2(acc[i][j][2], acc[i][j][3]);
        }
    }
}
