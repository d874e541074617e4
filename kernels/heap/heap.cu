// heap: per-thread allocation from a heap the kernel manages itself, in the spirit of the
// Halloc benchmarks papers/tanasic-thesis uses for local fault handling (Table 4.2,
// §6.5.4, Figure 6.14): "add-strings" — every thread allocates room for the concatenation
// of two strings, builds it there and publishes the pointer; a second kernel follows the
// pointers and hashes what it finds.
//
// The heap is a buffer the host only allocates, never writes, so its pages are first
// touched by the GPU: with demand paging they are exactly the "pages that are backing up
// dynamically allocated memory" whose faults need no data transfer.
//
// Allocation is deterministic, so every run (and every preemption mechanism) leaves the
// same heap: each TB owns a slab of `slab_bytes` (Halloc's slabs), and within it a thread's
// block starts at the TB-wide exclusive prefix sum of the rounded sizes before it (a warp
// scan with shuffles, then the warps' totals through shared memory), like a warp-aggregated
// allocator that hands out ranges in thread order instead of by atomic arrival order.

#define BLOCK 256
#define WARPS (BLOCK / 32)
// Halloc's smallest block is 16 bytes; every allocation is a multiple of it.
#define ALIGN 16u

extern "C" __global__ void heap_concat(const unsigned char* __restrict__ pool,
                                       const unsigned* __restrict__ offs,
                                       const unsigned* __restrict__ lens,
                                       unsigned n_strings, unsigned n,
                                       unsigned char* heap, unsigned slab_bytes,
                                       unsigned long long* ptrs, unsigned* out_lens)
{
    __shared__ unsigned warp_totals[WARPS];
    unsigned i = blockIdx.x * BLOCK + threadIdx.x;
    unsigned lane = threadIdx.x & 31u;
    unsigned warp = threadIdx.x >> 5;

    unsigned a = 0, b = 0, len = 0, size = 0;
    if (i < n) {
        a = i % n_strings;
        b = (i * 2654435761u >> 7) % n_strings;
        len = lens[a] + lens[b];
        // Room for the terminating zero, rounded up to the block size.
        size = (len + 1u + ALIGN - 1u) & ~(ALIGN - 1u);
    }

    // Inclusive scan of the sizes within the warp.
    unsigned incl = size;
    for (unsigned d = 1; d < 32; d <<= 1) {
        unsigned v = __shfl_up_sync(0xffffffffu, incl, d);
        if (lane >= d)
            incl += v;
    }
    if (lane == 31)
        warp_totals[warp] = incl;
    __syncthreads();
    unsigned offset = incl - size;
    for (unsigned w = 0; w < warp; ++w)
        offset += warp_totals[w];

    if (i < n) {
        unsigned char* p = heap + (unsigned long long)blockIdx.x * slab_bytes + offset;
        unsigned la = lens[a];
        const unsigned char* sa = pool + offs[a];
        for (unsigned k = 0; k < la; ++k)
            p[k] = sa[k];
        unsigned lb = lens[b];
        const unsigned char* sb = pool + offs[b];
        for (unsigned k = 0; k < lb; ++k)
            p[la + k] = sb[k];
        p[len] = 0;
        ptrs[i] = (unsigned long long)p;
        out_lens[i] = len;
    }
}

// FNV-1a over each thread's string, read through the pointer the first kernel published.
extern "C" __global__ void heap_hash(const unsigned long long* __restrict__ ptrs,
                                     const unsigned* __restrict__ lens, unsigned n,
                                     unsigned* hashes)
{
    unsigned i = blockIdx.x * BLOCK + threadIdx.x;
    if (i >= n)
        return;
    const unsigned char* p = (const unsigned char*)ptrs[i];
    unsigned h = 2166136261u;
    for (unsigned k = 0; k < lens[i]; ++k)
        h = (h ^ p[k]) * 16777619u;
    hashes[i] = h;
}
