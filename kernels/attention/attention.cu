// Fused attention forward pass with online softmax (flash-attention style):
// O = softmax(Q K^T * scale) V per head, Q/K/V f16 [head][seq][64], O f32 [head][seq][64].
// targets: sm_80 sm_90
//
// What it models: the inference/training hot spot of transformers, where the S = QK^T
// scores never reach memory. One TB of 4 warps handles 64 queries of one head (grid = seq/64
// x heads); each warp owns 16 query rows for the whole pass. Per 64-key tile:
//   S = Q K^T           mma.sync m16n8k16 (f16 in, f32 accumulate), K via ldmatrix
//   running max m, rescale factor expf(m_old - m_new), P = expf(S*scale - m)
//   O = O * rescale + P V   P converted to f16 in registers (__floats2half2_rn, i.e.
//                       cvt.rn.f16x2.f32) — the accumulator layout of S is exactly the
//                       A-fragment layout P needs — and V via ldmatrix.trans
// and O is divided by the running sum at the end. K and V tiles are double-buffered in shared
// memory with cp.async (cuda_pipeline.h primitives), so the next tile's copy overlaps this
// tile's math; Q is loaded once into registers.
//
// seq is a multiple of 64; head dimension fixed at 64. Registers are the limiting resource:
// each thread keeps 32 f32 of O, 32 of S and 16 words of Q fragments live.

#include <cuda_fp16.h>
#include <cuda_pipeline.h>

#define D 64        // head dimension
#define BQ 64       // queries per TB (16 per warp)
#define BKV 64      // keys per tile
#define THREADS 128
// Rows padded by 8 halves (144 bytes): conflict-free ldmatrix phases, 16-byte aligned rows.
#define LDH (D + 8)
// NVRTC has no <math.h> INFINITY; the running maximum starts at -inf so that the first
// tile's rescale factor is exactly expf(-inf) = 0.
#define NEG_INF __int_as_float(0xff800000)

__device__ __forceinline__ unsigned smem_addr(const void* p)
{
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// `volatile`: the asm reads shared memory behind the compiler's back, so it must stay
// between the barriers that order it.
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

// d += a * b for one 16x8x16 tile (f16 inputs, f32 accumulators).
__device__ __forceinline__ void mma_16816(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                          unsigned b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two f32 -> one register of two f16, `lo` in the low half (the lower column index).
__device__ __forceinline__ unsigned pack_half2(float lo, float hi)
{
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<unsigned*>(&h);
}

// Queues the asynchronous copy of 64 rows x 64 halves (global rows D apart) into a padded
// shared tile: 512 chunks of 16 bytes, four per thread.
__device__ __forceinline__ void copy_tile(half* dst, const half* src, int tid)
{
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        int chunk = tid + i * THREADS;
        int row = chunk >> 3;
        int col = (chunk & 7) * 8;
        __pipeline_memcpy_async(dst + row * LDH + col, src + row * D + col, 16);
    }
}

extern "C" __global__ void __launch_bounds__(THREADS)
attention_fwd(const half* __restrict__ q, const half* __restrict__ k,
              const half* __restrict__ v, float* __restrict__ o, int seq, float scale)
{
    __shared__ __align__(128) half qs[BQ * LDH];
    __shared__ __align__(128) half ks[2][BKV * LDH];
    __shared__ __align__(128) half vs[2][BKV * LDH];

    int tid = threadIdx.x;
    int lane = tid & 31;
    int warp = tid >> 5;
    size_t head = (size_t)blockIdx.y * seq * D;
    size_t q0 = head + (size_t)blockIdx.x * BQ * D;
    int ntiles = seq / BKV;

    // Group 0: the Q tile; group 1: the first K/V tile.
    copy_tile(qs, q + q0, tid);
    __pipeline_commit();
    copy_tile(ks[0], k + head, tid);
    copy_tile(vs[0], v + head, tid);
    __pipeline_commit();

    // Rows lane/4 (h = 0: accumulator registers 0,1) and lane/4 + 8 (h = 1: registers 2,3)
    // of the warp's 16; each row is spread over the four lanes of a quad.
    float row_max[2] = {NEG_INF, NEG_INF};
    float row_sum[2] = {0.0f, 0.0f};  // this lane's share; the quad is summed at the end
    float acc[8][4];                  // O: 8 tiles of 8 head dimensions
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e)
            acc[j][e] = 0.0f;
    unsigned qf[4][4];  // Q as A fragments, one per 16 head dimensions

    // ldmatrix addressing (see mgemm): lanes 0-15 rows 0-15, lanes 16-31 the same rows 8
    // halves on. For K (not transposed) the four matrices must instead be keys 0-7 x dims
    // 0-7, keys 0-7 x dims 8-15, keys 8-15 x dims 0-7, keys 8-15 x dims 8-15.
    int lrow = lane & 15;
    int lcol = (lane >> 4) * 8;
    int krow = ((lane >> 4) << 3) + (lane & 7);
    int kcol = ((lane >> 3) & 1) * 8;

    // Q's fragments, once, as soon as its group has landed (the first K/V tile may still be
    // in flight). Loading them before the loop, not in its first iteration, defines them on
    // every path to their use.
    __pipeline_wait_prior(1);
    __syncthreads();
#pragma unroll
    for (int kd = 0; kd < 4; ++kd)
        ldmatrix_x4(qf[kd], smem_addr(qs + (warp * 16 + lrow) * LDH + kd * 16 + lcol));

    for (int t = 0; t < ntiles; ++t) {
        int cur = t & 1;
        // Prefetch tile t+1 into the other buffer; the barrier at the end of the previous
        // iteration guarantees nobody still reads it. An empty group keeps the counting
        // uniform on the last tile.
        if (t + 1 < ntiles) {
            copy_tile(ks[cur ^ 1], k + head + (size_t)(t + 1) * BKV * D, tid);
            copy_tile(vs[cur ^ 1], v + head + (size_t)(t + 1) * BKV * D, tid);
        }
        __pipeline_commit();
        __pipeline_wait_prior(1);  // everything but the prefetch just issued has landed
        __syncthreads();

        // S = Q K^T for the warp's 16 queries x 64 keys: K rows are keys, i.e. K is the
        // n-major ("col") B operand already, no transpose.
        const half* kt = ks[cur];
        float s[8][4];
#pragma unroll
        for (int j = 0; j < 8; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                s[j][e] = 0.0f;
#pragma unroll
        for (int kd = 0; kd < 4; ++kd) {
#pragma unroll
            for (int jp = 0; jp < 4; ++jp) {
                unsigned r[4];
                ldmatrix_x4(r, smem_addr(kt + (jp * 16 + krow) * LDH + kd * 16 + kcol));
                mma_16816(s[2 * jp], qf[kd], r[0], r[1]);
                mma_16816(s[2 * jp + 1], qf[kd], r[2], r[3]);
            }
        }

        // Online softmax, per row: new max over the quad, rescale what was accumulated
        // under the old max, exponentiate this tile.
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            float mx = row_max[h];
#pragma unroll
            for (int j = 0; j < 8; ++j)
                mx = fmaxf(mx, fmaxf(s[j][2 * h], s[j][2 * h + 1]) * scale);
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            float rescale = expf(row_max[h] - mx);  // expf(-inf) = 0 on the first tile
            row_max[h] = mx;
            float sum = 0.0f;
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                float p0 = expf(s[j][2 * h] * scale - mx);
                float p1 = expf(s[j][2 * h + 1] * scale - mx);
                s[j][2 * h] = p0;
                s[j][2 * h + 1] = p1;
                sum += p0 + p1;
                acc[j][2 * h] *= rescale;
                acc[j][2 * h + 1] *= rescale;
            }
            row_sum[h] = row_sum[h] * rescale + sum;
        }

        // O += P V. P's A fragment for keys 16kk..16kk+15 is the S accumulators of key
        // tiles 2kk (a0-a3) and 2kk+1 (a4-a7), rounded to f16. V rows are keys, i.e. k-major:
        // ldmatrix.trans, with the matrix order of mgemm's B.
        const half* vt = vs[cur];
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
            unsigned pa[4] = {
                pack_half2(s[2 * kk][0], s[2 * kk][1]),
                pack_half2(s[2 * kk][2], s[2 * kk][3]),
                pack_half2(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                pack_half2(s[2 * kk + 1][2], s[2 * kk + 1][3]),
            };
#pragma unroll
            for (int dp = 0; dp < 4; ++dp) {
                unsigned r[4];
                ldmatrix_x4_trans(r, smem_addr(vt + (kk * 16 + lrow) * LDH + dp * 16 + lcol));
                mma_16816(acc[2 * dp], pa, r[0], r[1]);
                mma_16816(acc[2 * dp + 1], pa, r[2], r[3]);
            }
        }
        // The next iteration's prefetch overwrites this tile's buffers.
        __syncthreads();
    }

    int row = blockIdx.x * BQ + warp * 16 + (lane >> 2);
    int col = (lane & 3) * 2;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        float l = row_sum[h];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        float inv = 1.0f / l;
        float* out = o + head + (size_t)(row + 8 * h) * D + col;
#pragma unroll
        for (int j = 0; j < 8; ++j)
            *reinterpret_cast<float2*>(out + j * 8) =
                make_float2(acc[j][2 * h] * inv, acc[j][2 * h + 1] * inv);
    }
}
