// Multi-word (bignum) arithmetic, one independent 256-bit operation per thread: the
// building block of GPU elliptic-curve and RSA code, which multiplies field elements of 4-12
// machine words with explicit carry chains.
//
// Three entries over the same operands, eight 32-bit limbs each, least significant first:
//   mul_u32x8    the 512-bit product, 32-bit limbs: a schoolbook product, row by row, with
//                mad.lo.cc / madc.lo.cc / madc.hi.cc chains;
//   mul_u64x4    the same product with the operands read as four 64-bit limbs: the same chains
//                on .u64 (mad.lo.cc.u64, madc.hi.cc.u64);
//   addsub_u32x8 a + b with its carry out (add.cc / addc.cc / addc) and a - b with its borrow
//                (sub.cc / subc.cc / subc).
//
// The carry flag is invisible to C, so the chains are inline PTX, one instruction per asm
// statement as bignum libraries write them. `asm volatile` keeps the statements in program
// order; the compiler puts nothing between them that touches the flag, since only .cc
// instructions do. Fully unrolled so that the limb arrays live in registers.
//
// Product, row i (b limb i): the low halves of a[j]*b[i] go into r[i+j] (one chain whose
// carry is added into r[i+N]), then the high halves into r[i+j+1] (a second chain whose carry
// lands in r[i+N+1], still zero). r[i+N] holds at most 1 before the first addc, so that add
// cannot overflow; the product always fits 2N limbs, so the last row's final carry is zero.

template <typename T> struct Chain;

template <> struct Chain<unsigned> {
    __device__ static void mad_lo_cc(unsigned& r, unsigned a, unsigned b)
    {
        asm volatile("mad.lo.cc.u32 %0, %1, %2, %0;" : "+r"(r) : "r"(a), "r"(b));
    }
    __device__ static void madc_lo_cc(unsigned& r, unsigned a, unsigned b)
    {
        asm volatile("madc.lo.cc.u32 %0, %1, %2, %0;" : "+r"(r) : "r"(a), "r"(b));
    }
    __device__ static void mad_hi_cc(unsigned& r, unsigned a, unsigned b)
    {
        asm volatile("mad.hi.cc.u32 %0, %1, %2, %0;" : "+r"(r) : "r"(a), "r"(b));
    }
    __device__ static void madc_hi_cc(unsigned& r, unsigned a, unsigned b)
    {
        asm volatile("madc.hi.cc.u32 %0, %1, %2, %0;" : "+r"(r) : "r"(a), "r"(b));
    }
    // r += carry; clears the flag.
    __device__ static void addc_carry(unsigned& r)
    {
        asm volatile("addc.u32 %0, %0, 0;" : "+r"(r));
    }
};

template <> struct Chain<unsigned long long> {
    using u64 = unsigned long long;
    __device__ static void mad_lo_cc(u64& r, u64 a, u64 b)
    {
        asm volatile("mad.lo.cc.u64 %0, %1, %2, %0;" : "+l"(r) : "l"(a), "l"(b));
    }
    __device__ static void madc_lo_cc(u64& r, u64 a, u64 b)
    {
        asm volatile("madc.lo.cc.u64 %0, %1, %2, %0;" : "+l"(r) : "l"(a), "l"(b));
    }
    __device__ static void mad_hi_cc(u64& r, u64 a, u64 b)
    {
        asm volatile("mad.hi.cc.u64 %0, %1, %2, %0;" : "+l"(r) : "l"(a), "l"(b));
    }
    __device__ static void madc_hi_cc(u64& r, u64 a, u64 b)
    {
        asm volatile("madc.hi.cc.u64 %0, %1, %2, %0;" : "+l"(r) : "l"(a), "l"(b));
    }
    __device__ static void addc_carry(u64& r)
    {
        asm volatile("addc.u64 %0, %0, 0;" : "+l"(r));
    }
};

// r[0 .. 2N) = a * b, limbs least significant first.
template <typename T, int N>
__device__ __forceinline__ void mul_wide(T (&r)[2 * N], const T (&a)[N], const T (&b)[N])
{
    using C = Chain<T>;
#pragma unroll
    for (int k = 0; k < 2 * N; ++k) {
        r[k] = 0;
    }
#pragma unroll
    for (int i = 0; i < N; ++i) {
        C::mad_lo_cc(r[i], a[0], b[i]);
#pragma unroll
        for (int j = 1; j < N; ++j) {
            C::madc_lo_cc(r[i + j], a[j], b[i]);
        }
        C::addc_carry(r[i + N]);
        C::mad_hi_cc(r[i + 1], a[0], b[i]);
#pragma unroll
        for (int j = 1; j < N; ++j) {
            C::madc_hi_cc(r[i + j + 1], a[j], b[i]);
        }
        if (i + 1 < N) {
            C::addc_carry(r[i + N + 1]);
        }
    }
}

extern "C" __global__ void mul_u32x8(const uint4* __restrict__ a,
                                     const uint4* __restrict__ b,
                                     uint4* __restrict__ prod, int n)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) {
        return;
    }
    unsigned x[8], y[8], r[16];
#pragma unroll
    for (int q = 0; q < 2; ++q) {
        uint4 va = a[2 * t + q], vb = b[2 * t + q];
        x[4 * q] = va.x, x[4 * q + 1] = va.y, x[4 * q + 2] = va.z, x[4 * q + 3] = va.w;
        y[4 * q] = vb.x, y[4 * q + 1] = vb.y, y[4 * q + 2] = vb.z, y[4 * q + 3] = vb.w;
    }
    mul_wide<unsigned, 8>(r, x, y);
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        prod[4 * t + q] = make_uint4(r[4 * q], r[4 * q + 1], r[4 * q + 2], r[4 * q + 3]);
    }
}

extern "C" __global__ void mul_u64x4(const ulonglong2* __restrict__ a,
                                     const ulonglong2* __restrict__ b,
                                     ulonglong2* __restrict__ prod, int n)
{
    using u64 = unsigned long long;
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) {
        return;
    }
    u64 x[4], y[4], r[8];
#pragma unroll
    for (int q = 0; q < 2; ++q) {
        ulonglong2 va = a[2 * t + q], vb = b[2 * t + q];
        x[2 * q] = va.x, x[2 * q + 1] = va.y;
        y[2 * q] = vb.x, y[2 * q + 1] = vb.y;
    }
    mul_wide<u64, 4>(r, x, y);
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        prod[4 * t + q] = make_ulonglong2(r[2 * q], r[2 * q + 1]);
    }
}

// sum = a + b mod 2^256 and diff = a - b mod 2^256; flags[2t] is the carry out of the sum
// (0 or 1), flags[2t + 1] the borrow of the difference (0 or 0xffffffff).
extern "C" __global__ void addsub_u32x8(const unsigned* __restrict__ a,
                                        const unsigned* __restrict__ b,
                                        unsigned* __restrict__ sum,
                                        unsigned* __restrict__ diff,
                                        unsigned* __restrict__ flags, int n)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) {
        return;
    }
    const unsigned* x = a + 8 * t;
    const unsigned* y = b + 8 * t;
    unsigned s[8], d[8], carry, borrow;
    asm volatile("add.cc.u32 %0, %1, %2;" : "=r"(s[0]) : "r"(x[0]), "r"(y[0]));
#pragma unroll
    for (int k = 1; k < 8; ++k) {
        asm volatile("addc.cc.u32 %0, %1, %2;" : "=r"(s[k]) : "r"(x[k]), "r"(y[k]));
    }
    asm volatile("addc.u32 %0, 0, 0;" : "=r"(carry));
    asm volatile("sub.cc.u32 %0, %1, %2;" : "=r"(d[0]) : "r"(x[0]), "r"(y[0]));
#pragma unroll
    for (int k = 1; k < 8; ++k) {
        asm volatile("subc.cc.u32 %0, %1, %2;" : "=r"(d[k]) : "r"(x[k]), "r"(y[k]));
    }
    asm volatile("subc.u32 %0, 0, 0;" : "=r"(borrow));
#pragma unroll
    for (int k = 0; k < 8; ++k) {
        sum[8 * t + k] = s[k];
        diff[8 * t + k] = d[k];
    }
    flags[2 * t] = carry;
    flags[2 * t + 1] = borrow;
}
