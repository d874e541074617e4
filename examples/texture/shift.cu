// Source of shift.ptx (NVRTC 12.9, -std=c++17 --gpu-architecture=compute_80, as
// tools/gen_ptx.py compiles the suite). Each thread samples a 2D texture half a texel to
// the right of its own texel's centre: with linear filtering that is the mean of the texel
// and its right neighbour.
extern "C" __global__ void shift(cudaTextureObject_t img, float* out, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < w && y < h) out[y * w + x] = tex2D<float>(img, x + 1.0f, y + 0.5f);
}
