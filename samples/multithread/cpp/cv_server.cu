// cv_server: a camera-frame classification server whose request thread waits for a too-small preprocessing pool.
//
// Each request carries 4 camera frames (640x480 YUV420). Worker threads ("preproc-N", std::thread) turn every
// frame into a normalised 3x224x224 float tensor: YUV->RGB conversion, bilinear resize, a 5-tap blur and
// normalisation, several milliseconds of CPU per request. They push finished requests into a bounded queue
// and signal a std::condition_variable. The request thread ("request") pops the next request (waiting on the
// condition variable while the queue is empty), copies it to the GPU, runs a patch-embedding + MLP network
// (our own small kernels) and synchronises for the top-1 classes. With 2 workers the preprocessing cannot keep
// up, so most of every step is spent waiting for a worker. Fix: 8 workers (--fixed).
//
//   WAITS_ON = "the preprocessing worker threads 'preproc-N' (std::thread pool of 2), via a condition_variable"
//   WAITS_ON_NAMES = ["preproc", "worker"]
//   HOT_FUNCTIONS = ["yuv420_to_rgb", "resize_bilinear", "blur_5tap"]
//   FIX = "Run 8 preprocessing worker threads instead of 2."
//   FIX_WORDS = ["more workers", "worker threads", "workers", "threads"]
//
// Usage: cv_server [--fixed] [--steps N] [--ab ROUNDS] [--window W]. Exits 77 without a CUDA device.
// Build: nvcc -O2 -std=c++17 -arch=sm_90 -I<repo>/include cv_server.cu -L<build>/lib/runtime -linferscope -o cv_server
// Record: INFERSCOPE_ENABLE=1 ./cv_server (the annotations cost nothing while no session records).
#include <inferscope/scope.hpp>

#include <cuda_runtime.h>
#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#define CUDA_CHECK(x)                                                                          \
  do {                                                                                         \
    cudaError_t err_ = (x);                                                                    \
    if (err_ != cudaSuccess) {                                                                 \
      std::fprintf(stderr, "cv_server: %s failed: %s\n", #x, cudaGetErrorString(err_));       \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)

namespace {

constexpr int kFrames = 4, kCamW = 640, kCamH = 480, kSide = 224, kPatch = 16;
constexpr int kTokens = (kSide / kPatch) * (kSide / kPatch);  // 196 patches per frame
constexpr int kPatchDim = 3 * kPatch * kPatch, kDim = 384, kHidden = 1536, kBlocks = 3, kClasses = 1000;
constexpr size_t kInputFloats = size_t(kFrames) * 3 * kSide * kSide;
constexpr int kBrokenWorkers = 2, kFixedWorkers = 8;

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// ---- CPU preprocessing (runs on the worker threads) -----------------------------------------------------

void yuv420_to_rgb(const uint8_t* yuv, float* rgb) {
  const uint8_t* y = yuv;
  const uint8_t* u = yuv + kCamW * kCamH;
  const uint8_t* v = u + (kCamW / 2) * (kCamH / 2);
  for (int r = 0; r < kCamH; ++r)
    for (int c = 0; c < kCamW; ++c) {
      const float Y = y[r * kCamW + c], U = u[(r / 2) * (kCamW / 2) + c / 2] - 128.f,
                  V = v[(r / 2) * (kCamW / 2) + c / 2] - 128.f;
      float* px = rgb + (size_t(r) * kCamW + c) * 3;
      px[0] = std::clamp(Y + 1.402f * V, 0.f, 255.f);
      px[1] = std::clamp(Y - 0.344f * U - 0.714f * V, 0.f, 255.f);
      px[2] = std::clamp(Y + 1.772f * U, 0.f, 255.f);
    }
}

void resize_bilinear(const float* src, int sw, int sh, float* dst, int dw, int dh) {
  for (int r = 0; r < dh; ++r) {
    const float sy = std::max(0.f, (r + 0.5f) * sh / dh - 0.5f);
    const int y0 = std::min(int(sy), sh - 1), y1 = std::min(y0 + 1, sh - 1);
    const float wy = sy - y0;
    for (int c = 0; c < dw; ++c) {
      const float sx = std::max(0.f, (c + 0.5f) * sw / dw - 0.5f);
      const int x0 = std::min(int(sx), sw - 1), x1 = std::min(x0 + 1, sw - 1);
      const float wx = sx - x0;
      for (int ch = 0; ch < 3; ++ch) {
        const float a = src[(size_t(y0) * sw + x0) * 3 + ch], b = src[(size_t(y0) * sw + x1) * 3 + ch];
        const float d = src[(size_t(y1) * sw + x0) * 3 + ch], e = src[(size_t(y1) * sw + x1) * 3 + ch];
        dst[(size_t(r) * dw + c) * 3 + ch] = (a * (1 - wx) + b * wx) * (1 - wy) + (d * (1 - wx) + e * wx) * wy;
      }
    }
  }
}

void blur_5tap(float* img, float* tmp, int w, int h) {
  static const float k[5] = {1 / 16.f, 4 / 16.f, 6 / 16.f, 4 / 16.f, 1 / 16.f};
  for (int pass = 0; pass < 2; ++pass) {  // rows, then columns
    const float* in = pass == 0 ? img : tmp;
    float* out = pass == 0 ? tmp : img;
    for (int r = 0; r < h; ++r)
      for (int c = 0; c < w; ++c)
        for (int ch = 0; ch < 3; ++ch) {
          float s = 0;
          for (int t = -2; t <= 2; ++t) {
            const int rr = pass == 1 ? std::clamp(r + t, 0, h - 1) : r;
            const int cc = pass == 0 ? std::clamp(c + t, 0, w - 1) : c;
            s += k[t + 2] * in[(size_t(rr) * w + cc) * 3 + ch];
          }
          out[(size_t(r) * w + c) * 3 + ch] = s;
        }
  }
}

void normalize_to_chw(const float* hwc, float* chw) {
  static const float mean[3] = {123.7f, 116.3f, 103.5f}, stdev[3] = {58.4f, 57.1f, 57.4f};
  for (int ch = 0; ch < 3; ++ch)
    for (int i = 0; i < kSide * kSide; ++i)
      chw[size_t(ch) * kSide * kSide + i] = (hwc[size_t(i) * 3 + ch] - mean[ch]) / stdev[ch];
}

struct Request {
  uint64_t id = 0;
  std::vector<float> pixels;  // kFrames x 3 x kSide x kSide
};

class PreprocPool {
 public:
  PreprocPool(int workers, const char* tag, size_t capacity = 4) : capacity_(capacity) {
    for (int i = 0; i < workers; ++i) threads_.emplace_back([this, i, tag] { worker_main(i, tag); });
  }
  ~PreprocPool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    not_full_.notify_all();
    not_empty_.notify_all();
    for (auto& t : threads_) t.join();
  }

  Request pop() {
    std::unique_lock<std::mutex> lock(mu_);
    not_empty_.wait(lock, [this] { return !queue_.empty(); });
    Request r = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    not_full_.notify_one();
    return r;
  }

 private:
  void worker_main(int rank, const char* tag) {
    const std::string name = std::string("preproc-") + tag + std::to_string(rank);
    pthread_setname_np(pthread_self(), name.c_str());
    inferscope::set_thread_name(name);
    // The camera frames this worker decodes: a moving gradient with some texture, as a sensor would send.
    std::vector<std::vector<uint8_t>> frames(kFrames, std::vector<uint8_t>(kCamW * kCamH * 3 / 2));
    uint32_t seed = 12345u + rank;
    for (int f = 0; f < kFrames; ++f)
      for (size_t i = 0; i < frames[f].size(); ++i) {
        seed = seed * 1664525u + 1013904223u;
        frames[f][i] = uint8_t((i % kCamW) / 3 + (i / kCamW) / 4 + f * 20 + (seed >> 28));
      }
    std::vector<float> rgb(size_t(kCamW) * kCamH * 3), small(size_t(kSide) * kSide * 3), tmp(small.size());
    while (true) {
      Request r;
      {
        ISCOPE_RANGE("preprocess");
        r.pixels.resize(kInputFloats);
        for (int f = 0; f < kFrames; ++f) {
          yuv420_to_rgb(frames[f].data(), rgb.data());
          resize_bilinear(rgb.data(), kCamW, kCamH, small.data(), kSide, kSide);
          blur_5tap(small.data(), tmp.data(), kSide, kSide);
          normalize_to_chw(small.data(), r.pixels.data() + size_t(f) * 3 * kSide * kSide);
        }
      }
      std::unique_lock<std::mutex> lock(mu_);
      not_full_.wait(lock, [this] { return stop_ || queue_.size() < capacity_; });
      if (stop_) return;
      r.id = next_id_++;
      queue_.push_back(std::move(r));
      lock.unlock();
      not_empty_.notify_one();
    }
  }

  const size_t capacity_;
  std::mutex mu_;
  std::condition_variable not_empty_, not_full_;
  std::deque<Request> queue_;
  bool stop_ = false;
  uint64_t next_id_ = 0;
  std::vector<std::thread> threads_;
};

// ---- GPU side (runs on the request thread) -------------------------------------------------------------

__global__ void fill_uniform(float* p, size_t n, float scale, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
    p[i] = scale * (float(h & 0xffffff) / float(0xffffff) * 2.f - 1.f);
  }
}

// images (F x 3 x S x S) -> patches (F*kTokens x kPatchDim)
__global__ void im2patch(const float* img, float* patches) {
  const int row = blockIdx.x, f = row / kTokens, t = row % kTokens;
  const int py = t / (kSide / kPatch), px = t % (kSide / kPatch);
  for (int j = threadIdx.x; j < kPatchDim; j += blockDim.x) {
    const int ch = j / (kPatch * kPatch), dy = (j / kPatch) % kPatch, dx = j % kPatch;
    patches[size_t(row) * kPatchDim + j] =
        img[((size_t(f) * 3 + ch) * kSide + py * kPatch + dy) * kSide + px * kPatch + dx];
  }
}

// C (MxN) = act(A (MxK) * B (KxN) + bias) [+ residual C]; a plain shared-memory tiled SGEMM.
template <int kTile>
__global__ void gemm_bias_act(const float* A, const float* B, const float* bias, float* C, int M, int N, int K,
                              bool gelu, bool residual) {
  __shared__ float As[kTile][kTile], Bs[kTile][kTile + 1];
  const int r = blockIdx.y * kTile + threadIdx.y, c = blockIdx.x * kTile + threadIdx.x;
  float acc = 0;
  for (int k0 = 0; k0 < K; k0 += kTile) {
    As[threadIdx.y][threadIdx.x] = (r < M && k0 + threadIdx.x < K) ? A[size_t(r) * K + k0 + threadIdx.x] : 0.f;
    Bs[threadIdx.y][threadIdx.x] = (c < N && k0 + threadIdx.y < K) ? B[size_t(k0 + threadIdx.y) * N + c] : 0.f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kTile; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
    __syncthreads();
  }
  if (r < M && c < N) {
    float v = acc + bias[c];
    if (gelu) v = 0.5f * v * (1.f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
    C[size_t(r) * N + c] = residual ? C[size_t(r) * N + c] + v : v;
  }
}

// One block per frame: mean-pool the tokens, score every class, keep the best.
__global__ void pool_classify(const float* tokens, const float* W, const float* b, int* top1) {
  __shared__ float pooled[kDim];
  __shared__ float best_v[256];
  __shared__ int best_i[256];
  const int f = blockIdx.x;
  for (int d = threadIdx.x; d < kDim; d += blockDim.x) {
    float s = 0;
    for (int t = 0; t < kTokens; ++t) s += tokens[(size_t(f) * kTokens + t) * kDim + d];
    pooled[d] = s / kTokens;
  }
  __syncthreads();
  float bv = -1e30f;
  int bi = 0;
  for (int c = threadIdx.x; c < kClasses; c += blockDim.x) {
    float s = b[c];
    for (int d = 0; d < kDim; ++d) s += pooled[d] * W[size_t(d) * kClasses + c];
    if (s > bv) bv = s, bi = c;
  }
  best_v[threadIdx.x] = bv, best_i[threadIdx.x] = bi;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s && best_v[threadIdx.x + s] > best_v[threadIdx.x])
      best_v[threadIdx.x] = best_v[threadIdx.x + s], best_i[threadIdx.x] = best_i[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) top1[f] = best_i[0];
}

class Net {
 public:
  Net() {
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    CUDA_CHECK(cudaMallocHost(&staging_, kInputFloats * sizeof(float)));
    CUDA_CHECK(cudaMallocHost(&top1_host_, kFrames * sizeof(int)));
    images_ = alloc(kInputFloats);
    patches_ = alloc(size_t(kFrames) * kTokens * kPatchDim);
    x_ = alloc(size_t(kFrames) * kTokens * kDim);
    h_ = alloc(size_t(kFrames) * kTokens * kHidden);
    w_embed_ = param(size_t(kPatchDim) * kDim, kPatchDim), b_embed_ = param(kDim, kPatchDim);
    for (int i = 0; i < kBlocks; ++i) {
      w_up_.push_back(param(size_t(kDim) * kHidden, kDim)), b_up_.push_back(param(kHidden, kDim));
      w_down_.push_back(param(size_t(kHidden) * kDim, kHidden)), b_down_.push_back(param(kDim, kHidden));
    }
    w_cls_ = param(size_t(kDim) * kClasses, kDim), b_cls_ = param(kClasses, kDim);
    CUDA_CHECK(cudaMalloc(&top1_, kFrames * sizeof(int)));
    CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  // Returns the top-1 class of the request's first frame.
  int infer(const Request& r) {
    ISCOPE_RANGE("infer");
    std::memcpy(staging_, r.pixels.data(), kInputFloats * sizeof(float));
    CUDA_CHECK(cudaMemcpyAsync(images_, staging_, kInputFloats * sizeof(float), cudaMemcpyHostToDevice, stream_));
    const int rows = kFrames * kTokens;
    im2patch<<<rows, 256, 0, stream_>>>(images_, patches_);
    gemm(patches_, w_embed_, b_embed_, x_, rows, kDim, kPatchDim, false, false);
    for (int i = 0; i < kBlocks; ++i) {
      gemm(x_, w_up_[i], b_up_[i], h_, rows, kHidden, kDim, true, false);
      gemm(h_, w_down_[i], b_down_[i], x_, rows, kDim, kHidden, false, true);
    }
    pool_classify<<<kFrames, 256, 0, stream_>>>(x_, w_cls_, b_cls_, top1_);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaMemcpyAsync(top1_host_, top1_, kFrames * sizeof(int), cudaMemcpyDeviceToHost, stream_));
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    return top1_host_[0];
  }

 private:
  float* alloc(size_t n) {
    float* p = nullptr;
    CUDA_CHECK(cudaMalloc(&p, n * sizeof(float)));
    return p;
  }
  float* param(size_t n, int fan_in) {
    float* p = alloc(n);
    fill_uniform<<<256, 256, 0, stream_>>>(p, n, 1.f / std::sqrt(float(fan_in)), uint32_t(n * 7919u + seed_++));
    return p;
  }
  void gemm(const float* A, const float* B, const float* bias, float* C, int M, int N, int K, bool gelu,
            bool residual) {
    constexpr int kTile = 16;
    gemm_bias_act<kTile><<<dim3((N + kTile - 1) / kTile, (M + kTile - 1) / kTile), dim3(kTile, kTile), 0, stream_>>>(
        A, B, bias, C, M, N, K, gelu, residual);
  }

  cudaStream_t stream_;
  float *staging_, *images_, *patches_, *x_, *h_, *w_embed_, *b_embed_, *w_cls_, *b_cls_;
  std::vector<float*> w_up_, b_up_, w_down_, b_down_;
  int *top1_, *top1_host_;
  uint32_t seed_ = 1;
};

// One request: wait for a preprocessed one, run it, return its answer.
int handle_request(PreprocPool& pool, Net& net) {
  ISCOPE_RANGE("step");
  Request r;
  {
    ISCOPE_RANGE("wait_for_preprocessed");
    r = pool.pop();
  }
  return net.infer(r);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  bool fixed = false;
  int steps = 40, rounds = 0, window = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--fixed") fixed = true;
    else if (a == "--steps" && i + 1 < argc) steps = std::atoi(argv[++i]);
    else if (a == "--ab" && i + 1 < argc) rounds = std::atoi(argv[++i]);
    else if (a == "--window" && i + 1 < argc) window = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: %s [--fixed] [--steps N] [--ab ROUNDS] [--window W]\n", argv[0]);
      return 2;
    }
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("cv_server: no CUDA device; nothing to run\n");
    return 77;
  }
  pthread_setname_np(pthread_self(), "request");
  inferscope::set_thread_name("request");
  Net net;

  if (rounds > 0) {
    // Both pools run from the start; a pool whose queue is full just waits, so windows measure steady state.
    PreprocPool few(kBrokenWorkers, "a"), many(kFixedWorkers, "b");
    PreprocPool* pools[2] = {&few, &many};
    for (auto* p : pools)
      for (int i = 0; i < 2; ++i) handle_request(*p, net);  // warm-up
    std::vector<double> times[2];
    for (int r = 0; r < rounds; ++r)
      for (int j = 0; j < 2; ++j) {
        const int v = (r % 2 == 0) ? j : 1 - j;
        const double t = now_ms();
        for (int i = 0; i < window; ++i) handle_request(*pools[v], net);
        times[v].push_back((now_ms() - t) / window);
      }
    const double b = median(times[0]), x = median(times[1]);
    std::printf("AB broken_ms=%.3f fixed_ms=%.3f saving_pct=%.1f rounds=%d window=%d\n", b, x, (b - x) / b * 100,
                rounds, window);
    return 0;
  }

  PreprocPool pool(fixed ? kFixedWorkers : kBrokenWorkers, "");
  const double t0 = now_ms();
  double t_first = t0;
  for (int i = 0; i < steps; ++i) {
    handle_request(pool, net);
    if (i == 0) t_first = now_ms();
  }
  const double t_end = now_ms();
  std::printf("cv_server (%s): %d steps in %.2f s; first step %.1f ms (warm-up), then %.2f ms/step\n",
              fixed ? "fixed" : "broken", steps, (t_end - t0) / 1e3, t_first - t0,
              (t_end - t_first) / std::max(steps - 1, 1));
  return 0;
}
