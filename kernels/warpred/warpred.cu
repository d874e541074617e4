// targets: sm_80 sm_90
//
// Warp-aggregated group-by: per key, the count, wrapping sum, minimum and maximum of int
// values, as in a database hash aggregation or a histogram with payloads. Built on the warp
// intrinsics of Volta and Ampere: __match_any_sync finds the lanes holding the same key,
// __reduce_add/min/max_sync (redux.sync, sm_80 and later) reduce their values in one
// instruction each, and the group's leader updates the key's bins with one atomic per
// statistic instead of one per lane. Real key streams are often sorted or run-length
// clustered, so many warps hold a single key: __match_all_sync detects those (counted in
// `uniform`).
//
// A grid-stride loop over the elements; the trip count is the same for the whole warp, and
// the lanes past the end drop out of every mask through __ballot_sync. The groups take turns,
// lowest leader first: the lanes of one group run redux.sync with the group as membermask
// while the other lanes wait, and a ballot tells every lane which lanes that group held. The
// lanes also write their rank within their group (__popc of the group's lanes below them),
// the offset a warp-aggregated append would give them.

#define FULL_MASK 0xffffffffu
#define WARP 32

extern "C" __global__ void warp_groupby(const unsigned* __restrict__ keys,
                                        const int* __restrict__ vals,
                                        int n,
                                        unsigned* __restrict__ bin_count,
                                        int* __restrict__ bin_sum,
                                        int* __restrict__ bin_min,
                                        int* __restrict__ bin_max,
                                        unsigned* __restrict__ rank,
                                        unsigned* __restrict__ uniform)
{
    unsigned lane = threadIdx.x % WARP;
    unsigned below;
    asm("mov.u32 %0, %%lanemask_lt;" : "=r"(below));
    int stride = gridDim.x * blockDim.x;
    // The loop bound is per warp (its first element), so all 32 lanes iterate together.
    int warp_base = blockIdx.x * blockDim.x + (threadIdx.x & ~(WARP - 1));
    for (int base = warp_base; base < n; base += stride) {
        int i = base + lane;
        bool live = i < n;
        unsigned active = __ballot_sync(FULL_MASK, live);
        if (!live) {
            continue;
        }
        unsigned key = keys[i];
        int val = vals[i];
        unsigned group = __match_any_sync(active, key);
        int same;
        __match_all_sync(active, key, &same);
        unsigned first = __ffs(active) - 1;
        if (same && lane == first) {
            atomicAdd(uniform, 1u);
        }
        rank[i] = __popc(group & below);

        unsigned pending = active;
        while (pending) {
            unsigned leader = __ffs(pending) - 1;
            bool mine = (group >> leader) & 1;
            if (mine) {
                int total = __reduce_add_sync(group, val);
                int lo = __reduce_min_sync(group, val);
                int hi = __reduce_max_sync(group, val);
                if (lane == leader) {
                    atomicAdd(&bin_count[key], __popc(group));
                    atomicAdd(&bin_sum[key], total);
                    atomicMin(&bin_min[key], lo);
                    atomicMax(&bin_max[key], hi);
                }
            }
            pending &= ~__ballot_sync(active, mine);
        }
    }
}
