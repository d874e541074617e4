// One level of a level-synchronous breadth-first search over a CSR graph.
//
// Thread v expands vertex v if it is on the current frontier (level[v] == cur): it visits the
// neighbours, labels unvisited ones with cur + 1 and raises the `changed` flag. Concurrent
// writers of one vertex all store the same value, so the race is benign and the result is
// deterministic. The host relaunches with cur + 1 until no thread raised the flag. Irregular,
// memory-bound, highly divergent (degrees vary; most threads are idle on most levels).

extern "C" __global__ void bfs_level(const int* __restrict__ row_ptr,
                                     const int* __restrict__ col_idx,
                                     int* __restrict__ level,
                                     int cur, int n,
                                     int* __restrict__ changed)
{
    int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= n || level[v] != cur) {
        return;
    }
    int end = row_ptr[v + 1];
    for (int e = row_ptr[v]; e < end; ++e) {
        int u = col_idx[e];
        if (level[u] < 0) {
            level[u] = cur + 1;
            *changed = 1;
        }
    }
}
