// A small host/GPU simulator over dump::DumpBuilder for tests and benchmarks: it advances a host clock and a
// GPU stream clock the way a real program does (async launches queue on the stream, synchronizations wait
// for it) and writes the records the runtime would write, each at its end.
//
//   dump::DumpBuilder b(path);
//   testsupport::Sim sim(b);
//   sim.range("step", [&] { sim.py("preprocess", [&] { sim.host(2'000'000); }); sim.launch("gemm", 500'000); sim.sync(); });
#pragma once

#include "dump/builder.hpp"

#include <functional>
#include <string>

namespace inferscope::testsupport {

class Sim {
 public:
  explicit Sim(dump::DumpBuilder& b, std::string thread_name = "main", uint32_t os_tid = 4243)
      : b_(b), os_tid_(os_tid), thread_(b.thread(thread_name, os_tid)), gpu_(b.channel("cupti activity")) {}

  dump::DumpBuilder& builder() { return b_; }
  uint32_t thread() const { return thread_; }
  uint32_t gpu_channel() const { return gpu_; }
  int64_t now() const { return now_; }
  int64_t gpu_free() const { return gpu_free_; }
  void set_now(int64_t t) { now_ = t; }
  /// Calls recorded as CUPTI's API activity records: written to the GPU channel naming the caller's OS thread,
  /// each with the driver call the runtime makes inside it (same correlation id), as CUPTI delivers them.
  void set_api_activity(bool on) { api_activity_ = on; }

  /// Host work outside CUDA calls.
  void host(int64_t ns) { now_ += ns; }

  /// A range (depth follows the nesting of range() calls), written at its end.
  void range(const std::string& name, const std::function<void()>& body, bool layer_attr = false) {
    int64_t s = now_;
    uint32_t d = range_depth_++;
    body();
    --range_depth_;
    if (layer_attr) b_.range(thread_, name, d, s, now_, {{"layer", 1}});
    else b_.range(thread_, name, d, s, now_);
  }
  /// A Python call.
  void py(const std::string& qualname, const std::function<void()>& body, const std::string& file = "model.py",
          uint32_t line = 10) {
    uint32_t code = b_.code(qualname, file, line);
    int64_t s = now_;
    uint32_t d = py_depth_++;
    body();
    --py_depth_;
    b_.pycall(thread_, code, d, s, now_);
  }

  /// One run of a coroutine (from its first run or a resumption to its next await): the call record and its
  /// coroutine record, as the tracer writes them on CPython 3.11 and later.
  void coro(const std::string& qualname, uint64_t object, bool first, const std::function<void()>& body,
            const std::string& file = "server.py", uint32_t line = 20) {
    uint32_t code = b_.code(qualname, file, line);
    int64_t s = now_;
    uint32_t d = py_depth_++;
    body();
    --py_depth_;
    b_.pycall(thread_, code, d, s, now_);
    b_.coroutine(thread_, code, s, object, first);
  }

  /// cudaLaunchKernel: the kernel queues on the stream and starts when the stream is free.
  void launch(const std::string& kernel, int64_t kernel_ns, int64_t api_ns = 5'000) {
    uint32_t c = ++corr_;
    int64_t s = now_, e = now_ + api_ns;
    int64_t ks = std::max(gpu_free_, s + 2'000);
    gpu_free_ = ks + kernel_ns;
    api("cudaLaunchKernel", c, s, e, "cuLaunchKernel");
    b_.kernel(gpu_, kernel, c, ks, gpu_free_);
    now_ = e;
  }
  /// cudaGraphLaunch of graph `graph_id`, traced at graph level: one record spanning the graph's GPU work.
  void graph_replay(uint32_t graph_id, int64_t graph_ns, int64_t api_ns = 8'000) {
    uint32_t c = ++corr_;
    int64_t s = now_, e = now_ + api_ns;
    int64_t gs = std::max(gpu_free_, s + 3'000);
    gpu_free_ = gs + graph_ns;
    api("cudaGraphLaunch", c, s, e, "cuGraphLaunch");
    b_.graph_launch(gpu_, graph_id, c, gs, gpu_free_);
    now_ = e;
  }
  /// A synchronizing call: returns 3 us after the stream drains.
  void sync(const std::string& api = "cudaDeviceSynchronize", int64_t min_ns = 2'000) {
    uint32_t c = ++corr_;
    int64_t s = now_, e = std::max(now_ + min_ns, gpu_free_ + 3'000);
    this->api(api, c, s, e, "cuCtxSynchronize");
    now_ = e;
  }
  /// A copy at `gbps` GB/s; synchronous (cudaMemcpy) unless async (cudaMemcpyAsync).
  void copy(CopyKind kind, uint64_t bytes, double gbps, MemoryKind host_kind, bool async = false) {
    uint32_t c = ++corr_;
    int64_t s = now_;
    int64_t cs = std::max(gpu_free_, s + 4'000);
    int64_t ce = cs + int64_t(double(bytes) / gbps);
    gpu_free_ = ce;
    b_.memcpy(gpu_, kind, bytes, c, cs, ce, host_kind, 7, async);
    int64_t e = async ? s + 6'000 : ce + 3'000;
    api(async ? "cudaMemcpyAsync" : "cudaMemcpy", c, s, e, async ? "cuMemcpyAsync" : "cuMemcpy");
    now_ = e;
  }
  /// cudaMalloc / cudaFree taking `ns` of host time; cudaFree first waits for the device.
  void malloc(uint64_t bytes, int64_t ns) {
    uint32_t c = ++corr_;
    int64_t s = now_;
    b_.memory(gpu_, true, bytes, c, s + ns / 2, 0x7f0000000000ull + c * 4096);
    api("cudaMalloc", c, s, s + ns, "cuMemAlloc_v2");
    now_ = s + ns;
  }
  void free(uint64_t bytes, int64_t ns) {
    uint32_t c = ++corr_;
    int64_t s = now_, e = std::max(s, gpu_free_) + ns;
    b_.memory(gpu_, false, bytes, c, e - ns / 2);
    api("cudaFree", c, s, e, "cuMemFree_v2");
    now_ = e;
  }

 private:
  void api(const std::string& name, uint32_t c, int64_t s, int64_t e, const char* driver_call) {
    if (!api_activity_) return b_.api(thread_, name, c, s, e);
    b_.api_of(gpu_, os_tid_, driver_call, c, s + (e - s) / 4, e - (e - s) / 4, 0, ApiDomain::kDriver);
    b_.api_of(gpu_, os_tid_, name, c, s, e);
  }

  dump::DumpBuilder& b_;
  uint32_t os_tid_;
  bool api_activity_ = false;
  uint32_t thread_, gpu_;
  int64_t now_ = 1'000'000, gpu_free_ = 0;
  uint32_t corr_ = 100;
  uint32_t range_depth_ = 0, py_depth_ = 0;
};

}  // namespace inferscope::testsupport
