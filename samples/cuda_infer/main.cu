// An inference-like CUDA program with planted phases, for profiling and for the GPU tests:
//
//   iscope-run -o cuda.iscope -- ./sample_cuda_infer --kernels 1000
//
// Phases (each an ISCOPE_RANGE): H2D from pageable memory, H2D from pinned memory, a memset, a burst of
// tiny kernels, one long kernel, a D2H copy into pageable memory and a device synchronization. The last
// line says what it did, so a test can compare the dump with it.
#include <inferscope/scope.hpp>

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

__global__ void tiny_kernel(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * 1.0001f + 1.0f;
}

// Spins for about `cycles` GPU clock cycles: the "one long kernel" of the step.
__global__ void long_kernel(float* x, long long cycles) {
  long long start = clock64();
  float v = x[threadIdx.x];
  while (clock64() - start < cycles) v = v * 0.999f + 0.001f;
  x[threadIdx.x] = v;
}

bool check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "cuda_infer: %s failed: %s\n", what, cudaGetErrorString(e));
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  long kernels = 1000;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--kernels") == 0 && i + 1 < argc) kernels = std::atol(argv[++i]);
    else {
      std::fprintf(stderr, "usage: sample_cuda_infer [--kernels N]\n");
      return 2;
    }
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "cuda_infer: no CUDA device\n");
    return 1;
  }
  ISCOPE_RANGE("inference_step");
  constexpr size_t kIn = 8u << 20, kOut = 4u << 20, kElems = 1u << 16;
  float* d_in = nullptr;
  float* d_work = nullptr;
  if (!check(cudaMalloc(&d_in, kIn), "cudaMalloc") || !check(cudaMalloc(&d_work, kElems * sizeof(float)), "cudaMalloc"))
    return 1;
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  std::vector<char> pageable(kIn, 1);
  char* pinned = nullptr;
  check(cudaMallocHost(&pinned, kIn), "cudaMallocHost");
  std::memset(pinned, 2, kIn);
  {
    ISCOPE_RANGE("h2d_pageable");
    check(cudaMemcpy(d_in, pageable.data(), kIn, cudaMemcpyHostToDevice), "cudaMemcpy H2D pageable");
  }
  {
    ISCOPE_RANGE("h2d_pinned");
    check(cudaMemcpyAsync(d_in, pinned, kIn, cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync H2D pinned");
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  }
  {
    ISCOPE_RANGE("memset");
    check(cudaMemsetAsync(d_work, 0, kElems * sizeof(float), stream), "cudaMemsetAsync");
  }
  {
    ISCOPE_RANGE("tiny_kernels");
    for (long k = 0; k < kernels; ++k) tiny_kernel<<<kElems / 256, 256, 0, stream>>>(d_work, kElems);
    check(cudaGetLastError(), "tiny_kernel launch");
  }
  {
    ISCOPE_RANGE("long_kernel");
    long_kernel<<<1, 32, 0, stream>>>(d_work, 20'000'000LL);  // ~10 ms at ~2 GHz
    check(cudaGetLastError(), "long_kernel launch");
  }
  std::vector<char> out(kOut);
  {
    ISCOPE_RANGE("d2h");
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    check(cudaMemcpy(out.data(), d_in, kOut, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
  }
  {
    ISCOPE_RANGE("device_sync");
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
  cudaFreeHost(pinned);
  cudaFree(d_work);
  cudaFree(d_in);
  cudaStreamDestroy(stream);
  std::printf("cuda_infer: kernels=%ld tiny_kernels=%ld long_kernels=1 h2d_pageable_bytes=%zu h2d_pinned_bytes=%zu "
              "d2h_bytes=%zu memset_bytes=%zu\n",
              kernels + 1, kernels, kIn, kIn, kOut, kElems * sizeof(float));
  return 0;
}
