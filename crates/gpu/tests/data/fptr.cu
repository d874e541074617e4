// Source of fptr.sm_90.ptx (NVRTC 13.0, -std=c++17 --gpu-architecture=compute_90, as
// tools/gen_ptx.py compiles the suite): an indirect call through a table of device
// function pointers, the form NVRTC emits for `ops[k](a, b)`.
typedef float (*op_t)(float, float);
__device__ __noinline__ float opadd(float a, float b) { return a + b; }
__device__ __noinline__ float opmul(float a, float b) { return a * b; }
__device__ __noinline__ float opsub(float a, float b) { return a - b; }
__device__ op_t ops[3] = { opadd, opmul, opsub };

extern "C" __global__ void fptr(const int* sel, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = ops[sel[i] % 3](x[i], 2.0f);
}
