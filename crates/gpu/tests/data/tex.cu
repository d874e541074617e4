// Source of tex.sm_80.ptx and tex.sm_90.ptx (NVRTC 12.9 and 13.0, -std=c++17
// --gpu-architecture=compute_80 / compute_90, as tools/gen_ptx.py compiles the suite):
// texture-object fetches as CUDA C++ writes them. Thread i of one TB fetches at
// coordinates derived from i and stores what it read.

// Point or linear 2D fetch of one float channel at (i % 8 * 0.37 + u0, i / 8 * 0.61 + v0).
extern "C" __global__ void fetch2d(cudaTextureObject_t t, float u0, float v0, float* out) {
  int i = threadIdx.x;
  out[i] = tex2D<float>(t, (i % 8) * 0.37f + u0, (i / 8) * 0.61f + v0);
}

// All four channels of a 2D float4 fetch.
extern "C" __global__ void fetch2d4(cudaTextureObject_t t, float u0, float v0, float4* out) {
  int i = threadIdx.x;
  out[i] = tex2D<float4>(t, (i % 8) * 0.37f + u0, (i / 8) * 0.61f + v0);
}

// Integer texels by index (a texture over linear memory).
extern "C" __global__ void fetch1d_int(cudaTextureObject_t t, int* out) {
  int i = threadIdx.x;
  out[i] = tex1Dfetch<int>(t, i * 3 - 5);
}

// The green channel of the bilinear footprint.
extern "C" __global__ void gather2d(cudaTextureObject_t t, float4* out) {
  int i = threadIdx.x;
  out[i] = tex2Dgather<float4>(t, (i % 8) * 0.9f, (i / 8) * 0.7f, 1);
}

// A layered 2D texture and a 3D texture.
extern "C" __global__ void layered_and_3d(cudaTextureObject_t lay, cudaTextureObject_t vol,
                                          float* out) {
  int i = threadIdx.x;
  float x = (i % 8) * 0.5f + 0.25f;
  out[2 * i] = tex2DLayered<float>(lay, x, 1.5f, i / 8);
  out[2 * i + 1] = tex3D<float>(vol, x, 1.75f, (i / 8) * 0.5f);
}
