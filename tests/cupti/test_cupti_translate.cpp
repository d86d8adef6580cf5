// Translation of synthetic CUPTI activity records (built with the real CUPTI structs) into dump records,
// on their own and through a whole session with a fake CUPTI behind the collector's interface.
#include "collect/cupti/activity_translator.hpp"
#include "collect/cupti/cupti_collector.hpp"
#include "dump/reader.hpp"
#include "runtime/runtime.hpp"

#include <inferscope/scope.hpp>

#include <doctest/doctest.h>

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using namespace inferscope;
using namespace inferscope::cupti;

namespace {

const char* kMangled = "_Z11tiny_kernelPfi";

CUpti_ActivityKernel10 make_kernel(uint32_t corr, uint64_t start, uint64_t end) {
  CUpti_ActivityKernel10 k{};
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.name = kMangled;
  k.start = start, k.end = end;
  k.correlationId = corr;
  k.deviceId = 1, k.contextId = 7, k.streamId = 13;
  k.gridX = 256, k.gridY = 2, k.gridZ = 1, k.blockX = 128, k.blockY = 1, k.blockZ = 1;
  k.registersPerThread = 32, k.staticSharedMemory = 1024, k.dynamicSharedMemory = 2048;
  k.graphId = 5;
  return k;
}

CUpti_ActivityMemcpy6 make_copy(uint32_t corr, uint8_t kind, uint8_t src, uint8_t dst, uint64_t bytes, bool async) {
  CUpti_ActivityMemcpy6 m{};
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m.copyKind = kind, m.srcKind = src, m.dstKind = dst;
  m.flags = async ? CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC : 0;
  m.bytes = bytes;
  m.start = 5000 + corr, m.end = 6000 + corr;
  m.deviceId = 1, m.contextId = 7, m.streamId = 14;
  m.correlationId = corr;
  return m;
}

CUpti_ActivityMemset4 make_memset(uint32_t corr) {
  CUpti_ActivityMemset4 m{};
  m.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  m.value = 0xab, m.bytes = 4096, m.start = 7000, m.end = 7100;
  m.deviceId = 1, m.contextId = 7, m.streamId = 14, m.correlationId = corr;
  m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  return m;
}

CUpti_ActivitySynchronization2 make_sync(uint32_t corr) {
  CUpti_ActivitySynchronization2 s{};
  s.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  s.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
  s.start = 8000, s.end = 9000, s.correlationId = corr, s.contextId = 7, s.streamId = 14;
  s.cudaEventId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
  return s;
}

CUpti_ActivityMemory4 make_alloc(uint32_t corr, bool release) {
  CUpti_ActivityMemory4 m{};
  m.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
  m.memoryOperationType = release ? CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE
                                  : CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
  m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  m.correlationId = corr, m.address = 0x7f0000001000ull, m.bytes = 1u << 20, m.timestamp = 9500;
  m.deviceId = 1, m.contextId = 7, m.streamId = 0, m.isAsync = 0;
  return m;
}

struct Captured {
  std::vector<std::vector<uint8_t>> records;
  template <class T>
  T at(size_t i) const {
    T r;
    REQUIRE(records.at(i).size() == sizeof(T));
    std::memcpy(&r, records[i].data(), sizeof(T));
    return r;
  }
};

}  // namespace

TEST_CASE("kernel, copy, memset, sync and allocation records keep every field") {
  Captured out;
  ActivityTranslator t([&](const void* r, uint32_t n) {
    const auto* p = static_cast<const uint8_t*>(r);
    out.records.emplace_back(p, p + n);
  });
  t.set_context_device(7, 1);
  auto k = make_kernel(42, 1000, 2000);
  auto h2d = make_copy(43, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE,
                       CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 8u << 20, false);
  auto pinned = make_copy(44, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, CUPTI_ACTIVITY_MEMORY_KIND_PINNED,
                          CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 4u << 20, true);
  auto d2h = make_copy(45, CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
                       CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE, 1234, false);
  auto ms = make_memset(46);
  auto sy = make_sync(47);
  auto al = make_alloc(48, false);
  auto fr = make_alloc(49, true);
  for (const void* a : {(const void*)&k, (const void*)&h2d, (const void*)&pinned, (const void*)&d2h, (const void*)&ms,
                        (const void*)&sy, (const void*)&al, (const void*)&fr})
    CHECK(t.translate(static_cast<const CUpti_Activity*>(a)));
  REQUIRE(out.records.size() == 8);

  auto kr = out.at<GpuKernelRecord>(0);
  CHECK(kr.h.kind == RecordKind::kGpuKernel);
  CHECK(kr.start == 1000);
  CHECK(kr.end == 2000);
  CHECK(kr.correlation == 42);
  CHECK(kr.device == 1);
  CHECK(kr.context == 7);
  CHECK(kr.stream == 13);
  CHECK(kr.grid[0] == 256);
  CHECK(kr.grid[1] == 2);
  CHECK(kr.block[0] == 128);
  CHECK(kr.registers == 32);
  CHECK(kr.static_smem == 1024);
  CHECK(kr.dynamic_smem == 2048);
  CHECK(kr.graph_id == 5);
  CHECK(kr.name == t.kernel_name(kMangled));  // cached by pointer: the same id

  auto c0 = out.at<GpuMemcpyRecord>(1);
  CHECK(c0.h.kind == RecordKind::kGpuMemcpy);
  CHECK(static_cast<CopyKind>(c0.h.aux) == CopyKind::kHtoD);
  CHECK(c0.src_kind == MemoryKind::kPageable);
  CHECK(c0.dst_kind == MemoryKind::kDevice);
  CHECK(c0.bytes == (8u << 20));
  CHECK(c0.is_async == 0);
  CHECK(c0.correlation == 43);
  CHECK(c0.start == 5043);
  CHECK(c0.end == 6043);
  auto c1 = out.at<GpuMemcpyRecord>(2);
  CHECK(c1.src_kind == MemoryKind::kPinned);
  CHECK(c1.is_async == 1);
  auto c2 = out.at<GpuMemcpyRecord>(3);
  CHECK(static_cast<CopyKind>(c2.h.aux) == CopyKind::kDtoH);
  CHECK(c2.dst_kind == MemoryKind::kPageable);
  CHECK(c2.bytes == 1234);

  auto m = out.at<GpuMemsetRecord>(4);
  CHECK(m.h.kind == RecordKind::kGpuMemset);
  CHECK(static_cast<MemoryKind>(m.h.aux) == MemoryKind::kDevice);
  CHECK(m.value == 0xab);
  CHECK(m.bytes == 4096);

  auto s = out.at<GpuSyncRecord>(5);
  CHECK(s.h.kind == RecordKind::kGpuSync);
  CHECK(static_cast<SyncKind>(s.h.aux) == SyncKind::kStreamSynchronize);
  CHECK(s.device == 1);  // from the context's device
  CHECK(s.event == 0);
  CHECK(s.correlation == 47);

  auto a = out.at<GpuMemoryRecord>(6);
  CHECK(a.h.kind == RecordKind::kGpuMemory);
  CHECK(a.h.aux == 1);
  CHECK(a.bytes == (1u << 20));
  CHECK(a.address == 0x7f0000001000ull);
  CHECK(a.ts == 9500);
  CHECK(a.stream == 0xffffffffu);
  CHECK(out.at<GpuMemoryRecord>(7).h.aux == 2);

  auto st = t.stats();
  CHECK(st.kernels == 1);
  CHECK(st.memcpys == 3);
  CHECK(st.memsets == 1);
  CHECK(st.syncs == 1);
  CHECK(st.memory == 2);
}

TEST_CASE("API activity records become CUDA API records named by callback id; without system thread ids the caller is unknown") {
  Captured out;
  ActivityTranslator t([&](const void* r, uint32_t n) {
    const auto* p = static_cast<const uint8_t*>(r);
    out.records.emplace_back(p, p + n);
  });
  t.set_api_namer([](bool runtime, uint32_t cbid) { return (runtime ? 1000u : 2000u) + cbid; });
  CUpti_ActivityAPI rt{};
  rt.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  rt.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
  rt.start = 100, rt.end = 350, rt.processId = 77, rt.threadId = 4242, rt.correlationId = 9;
  CUpti_ActivityAPI drv = rt;
  drv.kind = CUPTI_ACTIVITY_KIND_DRIVER;
  drv.cbid = CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2;
  drv.correlationId = 10;
  CHECK(t.translate(reinterpret_cast<const CUpti_Activity*>(&rt)));
  CHECK(t.translate(reinterpret_cast<const CUpti_Activity*>(&drv)));
  REQUIRE(out.records.size() == 2);
  auto a = out.at<CudaApiRecord>(0);
  CHECK(a.h.kind == RecordKind::kCudaApi);
  CHECK(a.h.aux == static_cast<uint8_t>(ApiDomain::kRuntime));
  CHECK(a.cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000);
  CHECK(a.start == 100);
  CHECK(a.end == 350);
  CHECK(a.correlation == 9);
  CHECK(a.os_tid == 0);  // system thread ids not on: CUPTI's threadId (4242) is pthread_self(), not an OS id
  CHECK(a.name == 1000u + CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000);
  auto b = out.at<CudaApiRecord>(1);
  CHECK(b.h.aux == static_cast<uint8_t>(ApiDomain::kDriver));
  CHECK(b.name == 2000u + CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2);
  CHECK(t.stats().api_calls == 2);
}

TEST_CASE("with system thread ids, API records carry the caller's OS thread id; the collector's own calls stay out") {
  Captured out;
  ActivityTranslator t([&](const void* r, uint32_t n) {
    const auto* p = static_cast<const uint8_t*>(r);
    out.records.emplace_back(p, p + n);
  });
  std::vector<uint32_t> hooked;
  t.set_thread_hook([&](uint32_t tid) { hooked.push_back(tid); });
  t.set_system_thread_ids(true);
  auto api = [](CUpti_ActivityKind kind, uint32_t cbid, uint32_t tid, uint64_t start, uint32_t corr) {
    CUpti_ActivityAPI a{};
    a.kind = kind;
    a.cbid = cbid;
    a.start = start, a.end = start + 50, a.threadId = tid, a.correlationId = corr;
    return a;
  };
  const uint32_t launch = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
  const uint32_t memset = CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async;
  // Two application threads, several calls each: the hook hears of each thread once.
  for (auto a : {api(CUPTI_ACTIVITY_KIND_RUNTIME, launch, 501, 100, 1), api(CUPTI_ACTIVITY_KIND_RUNTIME, launch, 502, 110, 2),
                 api(CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 501, 120, 1),
                 api(CUPTI_ACTIVITY_KIND_RUNTIME, launch, 501, 200, 3)})
    CHECK(t.translate(reinterpret_cast<const CUpti_Activity*>(&a)));
  REQUIRE(out.records.size() == 4);
  CHECK(out.at<CudaApiRecord>(0).os_tid == 501);
  CHECK(out.at<CudaApiRecord>(1).os_tid == 502);
  CHECK(out.at<CudaApiRecord>(2).os_tid == 501);
  CHECK(out.at<CudaApiRecord>(2).h.aux == static_cast<uint8_t>(ApiDomain::kDriver));
  CHECK(out.at<CudaApiRecord>(2).correlation == 1);  // a runtime call's nested driver call: the analyzer drops it
  CHECK(hooked == std::vector<uint32_t>{501, 502});

  // Clock checks on thread 600 (the writer) from 1000 to 2000, and on application thread 501 (it called stop)
  // from 3000 on: their calls in those windows are the collector's, the rest of thread 501's are not.
  t.begin_internal(600, 1000);
  t.end_internal(600, 2000);
  t.begin_internal(501, 3000);
  for (auto a : {api(CUPTI_ACTIVITY_KIND_DRIVER, memset, 600, 1500, 10), api(CUPTI_ACTIVITY_KIND_DRIVER, memset, 501, 3100, 11),
                 api(CUPTI_ACTIVITY_KIND_RUNTIME, launch, 501, 2500, 12)})
    CHECK(t.translate(reinterpret_cast<const CUpti_Activity*>(&a)));
  t.end_internal(501, 3200);
  auto later = api(CUPTI_ACTIVITY_KIND_RUNTIME, launch, 501, 3300, 13);
  CHECK(t.translate(reinterpret_cast<const CUpti_Activity*>(&later)));
  REQUIRE(out.records.size() == 6);
  CHECK(out.at<CudaApiRecord>(4).correlation == 12);
  CHECK(out.at<CudaApiRecord>(5).correlation == 13);
  CHECK(hooked == std::vector<uint32_t>{501, 502});  // no entry for the writer thread
  CHECK(t.stats().internal_api_calls == 2);
  CHECK(t.stats().api_calls == 6);
}

TEST_CASE("a marker memset becomes a clock check once both host readings and the GPU interval are known") {
  Captured out;
  ActivityTranslator t([&](const void* r, uint32_t n) {
    const auto* p = static_cast<const uint8_t*>(r);
    out.records.emplace_back(p, p + n);
  });
  t.expect_clock_check(100, 0, 6900);
  auto ms = make_memset(100);  // GPU 7000..7100
  CHECK(t.translate(reinterpret_cast<const CUpti_Activity*>(&ms)));
  CHECK(out.records.empty());  // host_after not known yet
  t.complete_clock_check(100, 7300);
  REQUIRE(out.records.size() == 1);
  auto c = out.at<ClockCheckRecord>(0);
  CHECK(c.h.kind == RecordKind::kClockCheck);
  CHECK(c.cpu_before == 6900);
  CHECK(c.gpu_ts == 7000);
  CHECK(c.gpu_end == 7100);
  CHECK(c.cpu_after == 7300);
  // The collector's own allocations are not the application's.
  t.ignore_correlation(101);
  auto al = make_alloc(101, false);
  CHECK(t.translate(reinterpret_cast<const CUpti_Activity*>(&al)));
  CHECK(out.records.size() == 1);
}

TEST_CASE("graph-level tracing: off only for a request that records graph nodes one by one, never after an untraced graph") {
  const auto def = parse_activity_set("default"), none = parse_activity_set("none");
  const auto nodes = parse_activity_set("default,graph_nodes"), kernel = parse_activity_set("kernel");
  const auto python_only_sync = parse_activity_set("sync,runtime");  // no kernel, copy or memset: no node recorded
  // A session that wants graphs gets graph-level tracing, whatever the state before.
  CHECK(graph_level_wanted(false, false, true, def, false));
  CHECK(graph_level_wanted(false, true, true, def, false));
  // Recording every node, or kernels without `graph`, needs it off.
  CHECK_FALSE(graph_level_wanted(false, true, false, nodes, false));
  CHECK_FALSE(graph_level_wanted(false, true, false, kernel, false));
  // Nothing recorded needs it off: it stays as it is (switching it off costs every launch of a graph instantiated
  // with it on), in a session asking for nothing or for no node kind, and while idle.
  CHECK(graph_level_wanted(false, true, false, none, false));
  CHECK(graph_level_wanted(false, true, false, python_only_sync, false));
  CHECK_FALSE(graph_level_wanted(false, false, false, none, false));
  CHECK(graph_level_wanted(false, true, false, none, true));
  // Idle under a session that wants graphs: on, so that graphs instantiated between windows stay launchable.
  CHECK(graph_level_wanted(false, false, true, none, true));
  CHECK_FALSE(graph_level_wanted(false, false, false, none, true));
  // A graph instantiated without it rules it out for good (CUPTI would crash launching that graph with it on).
  CHECK_FALSE(graph_level_wanted(true, true, true, def, false));
  CHECK_FALSE(graph_level_wanted(true, true, true, none, true));
  CHECK_FALSE(graph_level_wanted(true, true, false, none, false));
}

TEST_CASE("activity specifications, selected API calls and demangling") {
  auto d = parse_activity_set("default");
  CHECK(d.kernel);
  CHECK(d.memcpy);
  CHECK(d.memset);
  CHECK_FALSE(d.sync);  // the sync calls' own records say it all; CUPTI's copy is an option (and in full)
  CHECK(d.memory);
  CHECK_FALSE(d.overhead);  // no analysis reads CUPTI's overhead records; full and the word still ask for them
  CHECK(parse_activity_set("full").overhead);
  CHECK(parse_activity_set("default,overhead").overhead);
  CHECK(d.runtime);
  CHECK(d.driver);
  CHECK_FALSE(d.runtime_all);
  CHECK(d.graph);  // CUDA graphs at graph level: one record per launch
  CHECK(parse_activity_set("") == d);
  auto m = parse_activity_set("minimal");
  CHECK(m.kernel);
  CHECK(m.graph);
  CHECK_FALSE(m.memset);
  // graph_nodes: every node of a graph launch one by one, wherever the word stands; full records them too.
  CHECK_FALSE(parse_activity_set("default,graph_nodes").graph);
  CHECK_FALSE(parse_activity_set("graph_nodes,default").graph);
  CHECK(parse_activity_set("default,graph_nodes").kernel);
  CHECK_FALSE(parse_activity_set("full").graph);
  CHECK_FALSE(parse_activity_set("kernel").graph);
  CHECK(parse_activity_set("full").runtime_all);
  CHECK(parse_activity_set("full").sync);
  CHECK(parse_activity_set("default,sync").sync);
  CHECK_FALSE(parse_activity_set("none").any());
  auto l = parse_activity_set("kernel, graph");
  CHECK(l.kernel);
  CHECK(l.graph);
  CHECK_FALSE(l.memcpy);
  CHECK_THROWS_WITH_AS(parse_activity_set("kernel,bogus"), doctest::Contains("'bogus'"), std::invalid_argument);
  auto act = parse_activity_set("default, api_activity");
  CHECK(act.api_activity);
  CHECK(act.runtime);
  // The presets record the selected calls through callbacks; api_activity asks for CUPTI's records, and
  // api_callbacks wins over it.
  CHECK_FALSE(d.api_activity);
  CHECK_FALSE(d.runtime_as_activity());
  CHECK_FALSE(m.api_activity);
  CHECK(act.runtime_as_activity());
  CHECK(act.driver_as_activity());
  CHECK(parse_activity_set("minimal,api_activity").runtime_as_activity());
  CHECK_FALSE(parse_activity_set("default,api_activity,api_callbacks").api_activity);
  CHECK_FALSE(parse_activity_set("full").runtime_as_activity());
  CHECK_FALSE(parse_activity_set("full,api_activity").driver_as_activity());  // runtime_all: callbacks
  CHECK_FALSE(parse_activity_set("default,api_callbacks").api_activity);
  CHECK_FALSE(parse_activity_set("api_callbacks,default").api_activity);
  CHECK_FALSE(parse_activity_set("kernel,runtime").api_activity);
  CHECK(parse_activity_set("kernel,runtime,api_activity").runtime_as_activity());
  CHECK_THROWS_WITH_AS(parse_activity_set("api_callback"), doctest::Contains("api_callbacks"), std::invalid_argument);

  CHECK(is_selected_api("cudaLaunchKernel"));
  CHECK(is_selected_api("cudaLaunchKernelExC_v11060"));
  CHECK(is_selected_api("cuLaunchKernelEx"));
  CHECK(is_selected_api("cudaMemcpyAsync"));
  CHECK(is_selected_api("cudaStreamWaitEvent"));
  CHECK(is_selected_api("cudaMallocAsync"));
  CHECK(is_selected_api("cudaFreeAsync"));
  CHECK(is_selected_api("cudaGraphLaunch"));
  CHECK(is_selected_api("cuMemAlloc_v2"));
  CHECK_FALSE(is_selected_api("cudaGetDevice"));
  CHECK_FALSE(is_selected_api("cudaEventRecord"));
  CHECK_FALSE(is_selected_api("cuCtxGetCurrent"));
  CHECK_FALSE(is_selected_api(nullptr));

  CHECK(demangle(kMangled) == "tiny_kernel(float*, int)");
  CHECK(demangle("plain_c_kernel") == "plain_c_kernel");
}

namespace {

// The buffer callbacks the collector registered (once per process, whichever fake was loaded then).
CUpti_BuffersCallbackRequestFunc g_buffer_request = nullptr;
CUpti_BuffersCallbackCompleteFunc g_buffer_complete = nullptr;

// A CUPTI that starts and hands out the records of `records` as one buffer.
class FakeCupti : public CuptiApi {
 public:
  std::vector<const CUpti_Activity*> records;
  size_t next = 0;
  CUptiResult cuptiSubscribe(CUpti_SubscriberHandle* s, CUpti_CallbackFunc, void*) override {
    *s = reinterpret_cast<CUpti_SubscriberHandle>(this);
    return CUPTI_SUCCESS;
  }
  CUptiResult cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc f) override {
    timestamp = f;
    return CUPTI_SUCCESS;
  }
  CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc r, CUpti_BuffersCallbackCompleteFunc c) override {
    g_buffer_request = r;
    g_buffer_complete = c;
    return CUPTI_SUCCESS;
  }
  CUptiResult cuptiActivityEnable(CUpti_ActivityKind k) override {
    enabled[k] = true;
    return CUPTI_SUCCESS;
  }
  CUptiResult cuptiActivityDisable(CUpti_ActivityKind k) override {
    enabled[k] = false;
    return CUPTI_SUCCESS;
  }
  CUptiResult cuptiActivityFlushAll(uint32_t) override { return CUPTI_SUCCESS; }
  CUptiResult cuptiActivityGetNextRecord(uint8_t*, size_t, CUpti_Activity** r) override {
    if (*r == nullptr) next = 0;
    if (next >= records.size()) return CUPTI_ERROR_MAX_LIMIT_REACHED;
    *r = const_cast<CUpti_Activity*>(records[next++]);
    return CUPTI_SUCCESS;
  }
  CUptiResult cuptiActivitySetAttribute(CUpti_ActivityAttribute a, size_t* n, void* v) override {
    uint64_t value = 0;
    std::memcpy(&value, v, std::min(*n, sizeof(value)));
    attributes[a] = value;
    return refuse_zeroed && a == CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER ? CUPTI_ERROR_NOT_SUPPORTED
                                                                                : CUPTI_SUCCESS;
  }
  CUpti_TimestampCallbackFunc timestamp = nullptr;
  std::map<CUpti_ActivityKind, bool> enabled;
  std::map<CUpti_ActivityAttribute, uint64_t> attributes;
  bool refuse_zeroed = false;
};

std::string temp_path(const char* name) {
  return std::string(INFERSCOPE_BINARY_DIR) + "/tests/cupti/" + name + "." + std::to_string(::getpid()) + ".iscope";
}

// Starts a session (GPU collection only) over `fake`, which the collector then owns.
Config start_fake_session(CuptiApi* fake, const char* name, const char* activities = "default",
                          uint32_t buffer_kb = 8192) {
  set_api_factory_for_test([fake] { return std::unique_ptr<CuptiApi>(fake); });
  Config cfg;
  cfg.mode = CaptureMode::kFull;  // the fake's timestamps lie before the session: adaptive windows would drop them
  cfg.output = temp_path(name);
  cfg.cupti = true;
  cfg.system = false;
  cfg.python = false;
  cfg.cupti_activities = activities;
  cfg.cupti_buffer_kb = buffer_kb;
  REQUIRE(inferscope::start(cfg));
  return cfg;
}

}  // namespace

TEST_CASE("a session with a (fake) CUPTI writes GPU records into the dump with their kinds and fields") {
  FakeCupti* fake = new FakeCupti;  // owned by the collector's state from here on
  auto k1 = make_kernel(1, 100, 200), k2 = make_kernel(2, 300, 400);
  auto h2d = make_copy(3, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE,
                       CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 1000, false);
  auto pin = make_copy(4, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, CUPTI_ACTIVITY_MEMORY_KIND_PINNED,
                       CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 2000, true);
  auto sy = make_sync(5);
  fake->records = {reinterpret_cast<CUpti_Activity*>(&k1), reinterpret_cast<CUpti_Activity*>(&k2),
                   reinterpret_cast<CUpti_Activity*>(&h2d), reinterpret_cast<CUpti_Activity*>(&pin),
                   reinterpret_cast<CUpti_Activity*>(&sy)};
  set_api_factory_for_test([fake] { return std::unique_ptr<CuptiApi>(fake); });

  Config cfg;
  cfg.mode = CaptureMode::kFull;
  cfg.output = temp_path("fake_cupti");
  cfg.cupti = true;
  cfg.system = false;
  cfg.python = false;
  REQUIRE(inferscope::start(cfg));
  CHECK(std::string(inferscope_cupti_status()).rfind("on: CUPTI", 0) == 0);
  REQUIRE(static_cast<bool>(fake->timestamp));
  // The session clock drives CUPTI's timestamps.
  const uint64_t t0 = detail::now();
  const uint64_t ts = fake->timestamp();
  CHECK(ts >= t0);
  CHECK(fake->enabled[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL]);
  CHECK(fake->enabled[CUPTI_ACTIVITY_KIND_MEMCPY]);
  // Switched at run time, as the overhead benchmark does.
  CHECK(inferscope_cupti_set_activities("none") == 0);
  CHECK_FALSE(fake->enabled[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL]);
  CHECK(inferscope_cupti_set_activities("default") == 0);
  CHECK(fake->enabled[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL]);
  CHECK(inferscope_cupti_set_activities("nonsense") == -1);
  uint8_t buffer[8];
  deliver_buffer_for_test(buffer, sizeof(buffer));
  REQUIRE(inferscope::stop());
  CHECK_FALSE(fake->enabled[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL]);

  dump::DumpReader r(cfg.output);
  CHECK(r.complete());
  std::map<RecordKind, int> kinds;
  std::vector<GpuMemcpyRecord> copies;
  uint32_t gpu_thread = 0;
  for (auto& [id, t] : r.threads())
    if (t.is_channel() && t.name == "gpu") gpu_thread = id;
  CHECK(gpu_thread != 0);
  r.for_each_record([&](uint32_t thread, const RecordHeader& h, const uint8_t* p) {
    ++kinds[h.kind];
    if (h.kind == RecordKind::kGpuKernel || h.kind == RecordKind::kGpuMemcpy) CHECK(thread == gpu_thread);
    if (h.kind == RecordKind::kGpuMemcpy) copies.push_back(dump::load<GpuMemcpyRecord>(p));
    if (h.kind == RecordKind::kGpuKernel) {
      auto k = dump::load<GpuKernelRecord>(p);
      CHECK(r.string_at(k.name) == "tiny_kernel(float*, int)");
      CHECK((k.start == 100 || k.start == 300));
    }
  });
  CHECK(kinds[RecordKind::kGpuKernel] == 2);
  CHECK(kinds[RecordKind::kGpuMemcpy] == 2);
  CHECK(kinds[RecordKind::kGpuSync] == 1);
  REQUIRE(copies.size() == 2);
  CHECK(copies[0].src_kind == MemoryKind::kPageable);
  CHECK(copies[0].bytes == 1000);
  CHECK(copies[1].src_kind == MemoryKind::kPinned);
  CHECK(copies[1].bytes == 2000);
  std::string status;
  for (auto& [k, v] : r.collector_status())
    if (k == "cupti") status = v;
  CHECK(status.find("on: CUPTI") == 0);
  CHECK(status.find("2 kernels, 2 copies") != std::string::npos);
  set_api_factory_for_test(nullptr);
  ::unlink(cfg.output.c_str());
}

namespace {

// A CUPTI that names a few callback ids and keeps what the collector switched: callbacks per (domain, cbid),
// activity kinds, and the per-call API activity settings (CUPTI's rule: enabling or disabling the kind
// overrides the per-call settings made before it).
class SwitchCupti : public FakeCupti {
 public:
  bool has_thread_id_type = true;
  CUpti_ActivityKind refused = CUPTI_ACTIVITY_KIND_INVALID;  // a kind this CUPTI will not enable
  std::vector<CUpti_ActivityThreadIdType> thread_id_types;
  std::map<std::pair<CUpti_CallbackDomain, uint32_t>, bool> callbacks;
  struct PerCall {
    bool kind = false;
    std::map<uint32_t, bool> set;
    bool on(uint32_t cbid) const { return set.count(cbid) ? set.at(cbid) : kind; }
  } runtime_records, driver_records;

  static const std::map<uint32_t, const char*>& runtime_names() {
    static const std::map<uint32_t, const char*> n = {{CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, "cudaLaunchKernel"},
                                                      {CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, "cudaMemcpyAsync"},
                                                      {CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020, "cudaGetDevice"}};
    return n;
  }
  static const std::map<uint32_t, const char*>& driver_names() {
    static const std::map<uint32_t, const char*> n = {{CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, "cuLaunchKernel"},
                                                      {CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async, "cuMemsetD8Async"},
                                                      {CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, "cuMemAlloc_v2"},
                                                      {CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize, "cuStreamSynchronize"},
                                                      {CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent, "cuCtxGetCurrent"}};
    return n;
  }

  CUptiResult cuptiSetThreadIdType(CUpti_ActivityThreadIdType t) override {
    if (!has_thread_id_type) return CuptiApi::cuptiSetThreadIdType(t);
    thread_id_types.push_back(t);
    return CUPTI_SUCCESS;
  }
  CUptiResult cuptiGetCallbackName(CUpti_CallbackDomain d, uint32_t c, const char** n) override {
    const auto& names = d == CUPTI_CB_DOMAIN_RUNTIME_API ? runtime_names() : driver_names();
    auto it = names.find(c);
    if (it == names.end()) return CUPTI_ERROR_INVALID_PARAMETER;
    *n = it->second;
    return CUPTI_SUCCESS;
  }
  CUptiResult cuptiEnableCallback(uint32_t e, CUpti_SubscriberHandle, CUpti_CallbackDomain d, CUpti_CallbackId c) override {
    callbacks[{d, c}] = e != 0;
    return CUPTI_SUCCESS;
  }
  CUptiResult cuptiActivityEnable(CUpti_ActivityKind k) override {
    if (k == refused) return CUPTI_ERROR_NOT_SUPPORTED;
    kind_switch(k, true);
    return FakeCupti::cuptiActivityEnable(k);
  }
  CUptiResult cuptiActivityDisable(CUpti_ActivityKind k) override {
    kind_switch(k, false);
    return FakeCupti::cuptiActivityDisable(k);
  }
  CUptiResult cuptiActivityEnableRuntimeApi(CUpti_CallbackId c, uint8_t e) override {
    runtime_records.set[c] = e != 0;
    return CUPTI_SUCCESS;
  }
  CUptiResult cuptiActivityEnableDriverApi(CUpti_CallbackId c, uint8_t e) override {
    driver_records.set[c] = e != 0;
    return CUPTI_SUCCESS;
  }

  bool kind_on(CUpti_ActivityKind k) const { return enabled.count(k) && enabled.at(k); }
  bool callback(CUpti_CallbackDomain d, uint32_t c) const {
    auto it = callbacks.find({d, c});
    return it != callbacks.end() && it->second;
  }
  // The callback ids (of the whole domain) whose API activity records are on.
  std::vector<uint32_t> recorded(bool runtime) const {
    std::vector<uint32_t> out;
    const uint32_t n = runtime ? CUPTI_RUNTIME_TRACE_CBID_SIZE : CUPTI_DRIVER_TRACE_CBID_SIZE;
    for (uint32_t i = 1; i < n; ++i)
      if ((runtime ? runtime_records : driver_records).on(i)) out.push_back(i);
    return out;
  }

 private:
  void kind_switch(CUpti_ActivityKind k, bool on) {
    PerCall* p = k == CUPTI_ACTIVITY_KIND_RUNTIME ? &runtime_records : k == CUPTI_ACTIVITY_KIND_DRIVER ? &driver_records : nullptr;
    if (!p) return;
    p->kind = on;
    p->set.clear();
  }
};

// The selected calls of SwitchCupti's names, sorted by callback id.
const std::vector<uint32_t> kSelectedRuntime = {CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020,
                                                CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000};
const std::vector<uint32_t> kSelectedDriver = [] {
  std::vector<uint32_t> v = {CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async,
                             CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize};
  std::sort(v.begin(), v.end());
  return v;
}();

// The state `default,api_activity` leaves: the selected calls as API activity records of both domains, no callback for
// them but the two driver calls the clock checks watch (cuMemsetD8Async, cuMemAlloc_v2).
void check_api_activity_state(const SwitchCupti& f) {
  CHECK(f.kind_on(CUPTI_ACTIVITY_KIND_RUNTIME));
  CHECK(f.kind_on(CUPTI_ACTIVITY_KIND_DRIVER));
  CHECK(f.recorded(true) == kSelectedRuntime);
  CHECK(f.recorded(false) == kSelectedDriver);
  CHECK_FALSE(f.callback(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000));
  CHECK_FALSE(f.callback(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020));
  CHECK_FALSE(f.callback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel));
  CHECK_FALSE(f.callback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize));
  CHECK(f.callback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async));
  CHECK(f.callback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2));
}

// The state of the callback path for "runtime" (+ "driver" when `driver`): callbacks for the selected calls, no
// API activity records.
void check_callback_state(const SwitchCupti& f, bool driver) {
  CHECK_FALSE(f.kind_on(CUPTI_ACTIVITY_KIND_RUNTIME));
  CHECK(f.recorded(true).empty());
  CHECK(f.recorded(false).empty());
  CHECK(f.callback(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000));
  CHECK(f.callback(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020));
  CHECK_FALSE(f.callback(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020));
  CHECK(f.callback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel) == driver);
  CHECK_FALSE(f.callback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent));
}

// A session recording the selected calls as API activity records through `fake` (owned by the collector's
// state from here on), GPU collection only; its config (the dump's path).
Config start_with_fake(SwitchCupti* fake, const char* name) {
  return start_fake_session(fake, name, "default,api_activity");
}
void stop_fake_session() {
  REQUIRE(inferscope::stop());
  set_api_factory_for_test(nullptr);
}

}  // namespace

TEST_CASE("api_activity records the selected calls as API activity records named by OS thread id; switching sets works both ways") {
  auto* fake = new SwitchCupti;
  // A CUDA worker thread that never records anything itself.
  std::mutex mu;
  std::condition_variable cv;
  uint32_t worker_tid = 0;
  bool done = false;
  std::thread worker([&] {
    ::pthread_setname_np(::pthread_self(), "launcher");
    std::unique_lock lk(mu);
    worker_tid = static_cast<uint32_t>(::syscall(SYS_gettid));
    cv.notify_all();
    cv.wait(lk, [&] { return done; });
  });
  {
    std::unique_lock lk(mu);
    cv.wait(lk, [&] { return worker_tid != 0; });
  }
  CUpti_ActivityAPI launch{};
  launch.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  launch.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
  launch.start = detail::now(), launch.end = launch.start + 100, launch.threadId = worker_tid, launch.correlationId = 77;
  CUpti_ActivityAPI again = launch;
  again.correlationId = 78;
  fake->records = {reinterpret_cast<CUpti_Activity*>(&launch), reinterpret_cast<CUpti_Activity*>(&again)};
  Config cfg = start_with_fake(fake, "api_activity");
  const std::string status = inferscope_cupti_status();
  CHECK(status.find("api_activity") != std::string::npos);
  CHECK(status.find("on callbacks") == std::string::npos);
  CHECK(fake->thread_id_types == std::vector<CUpti_ActivityThreadIdType>{CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM});
  check_api_activity_state(*fake);

  CHECK(inferscope_cupti_set_activities("kernel,runtime,api_callbacks") == 0);
  check_callback_state(*fake, false);
  CHECK_FALSE(fake->kind_on(CUPTI_ACTIVITY_KIND_DRIVER));
  CHECK_FALSE(fake->callback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async));  // no memset
  CHECK(inferscope_cupti_set_activities("default,api_activity") == 0);
  check_api_activity_state(*fake);
  CHECK(inferscope_cupti_set_activities("default") == 0);  // the default: callbacks
  check_callback_state(*fake, true);
  CHECK(inferscope_cupti_set_activities("minimal,api_activity") == 0);
  CHECK(fake->recorded(true) == kSelectedRuntime);
  CHECK(fake->recorded(false) == kSelectedDriver);
  CHECK_FALSE(fake->callback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async));

  uint8_t buffer[8];
  deliver_buffer_for_test(buffer, sizeof(buffer));  // translated while the worker lives
  {
    std::lock_guard lk(mu);
    done = true;
  }
  cv.notify_all();
  worker.join();
  stop_fake_session();

  dump::DumpReader r(cfg.output);
  uint32_t gpu_thread = 0, worker_entry = 0;
  int worker_entries = 0;
  for (auto& [id, t] : r.threads()) {
    if (t.is_channel() && t.name == "gpu") gpu_thread = id;
    if (!t.is_channel() && t.os_tid == worker_tid) {
      worker_entry = id;
      ++worker_entries;
      CHECK(t.name == "launcher");
    }
  }
  CHECK(worker_entries == 1);  // one entry for the caller, however many of its calls came in
  std::vector<CudaApiRecord> calls;
  r.for_each_record([&](uint32_t thread, const RecordHeader& h, const uint8_t* p) {
    if (h.kind != RecordKind::kCudaApi) return;
    CHECK(thread == gpu_thread);
    calls.push_back(dump::load<CudaApiRecord>(p));
  });
  REQUIRE(calls.size() == 2);
  for (auto& c : calls) {
    CHECK(c.os_tid == worker_tid);
    CHECK(r.string_at(c.name) == "cudaLaunchKernel");
  }
  CHECK(worker_entry != 0);
  ::unlink(cfg.output.c_str());
}

TEST_CASE("a CUPTI without system thread ids: api_activity falls back to callbacks and the status says so") {
  auto* fake = new SwitchCupti;
  fake->has_thread_id_type = false;
  Config cfg = start_with_fake(fake, "no_system_tids");
  const std::string status = inferscope_cupti_status();
  CHECK(status.find("on: CUPTI") == 0);
  CHECK(status.find("API calls on callbacks") != std::string::npos);
  CHECK(status.find("cuptiSetThreadIdType") != std::string::npos);
  check_callback_state(*fake, true);
  CHECK_FALSE(fake->kind_on(CUPTI_ACTIVITY_KIND_DRIVER));
  // Asking for API activity records at run time keeps the callbacks too.
  CHECK(inferscope_cupti_set_activities("kernel,runtime,api_activity") == 0);
  check_callback_state(*fake, false);
  stop_fake_session();
  ::unlink(cfg.output.c_str());
}

TEST_CASE("a CUPTI that refuses driver API activity records: the driver calls stay on callbacks") {
  auto* fake = new SwitchCupti;
  fake->refused = CUPTI_ACTIVITY_KIND_DRIVER;
  Config cfg = start_with_fake(fake, "driver_refused");
  const std::string status = inferscope_cupti_status();
  CHECK(status.find("driver api_activity") != std::string::npos);
  CHECK(status.find("callbacks instead") != std::string::npos);
  CHECK(fake->recorded(true) == kSelectedRuntime);
  CHECK(fake->recorded(false).empty());
  CHECK_FALSE(fake->callback(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000));
  CHECK(fake->callback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel));
  CHECK(fake->callback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize));
  // Switching to callbacks and back tries again (and is refused again).
  CHECK(inferscope_cupti_set_activities("default,api_callbacks") == 0);
  check_callback_state(*fake, true);
  CHECK(inferscope_cupti_set_activities("default,api_activity") == -1);
  CHECK(fake->recorded(true) == kSelectedRuntime);
  CHECK(fake->callback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel));
  stop_fake_session();
  ::unlink(cfg.output.c_str());
}

namespace {

bool all_zero(const uint8_t* b, size_t n) {
  return std::all_of(b, b + n, [](uint8_t x) { return x == 0; });
}

// Asks for a buffer, writes `mark` into its first bytes as CUPTI would, hands it back and asks again: whether
// the same buffer came back (from the pool), and its first byte then.
std::pair<bool, uint8_t> reuse_after_write(uint8_t mark) {
  uint8_t* b = nullptr;
  size_t size = 0, max_records = 0;
  g_buffer_request(&b, &size, &max_records);
  REQUIRE(b != nullptr);
  std::memset(b, mark, 16);
  g_buffer_complete(nullptr, 0, b, size, 16);
  uint8_t* again = nullptr;
  g_buffer_request(&again, &size, &max_records);
  REQUIRE(again != nullptr);
  const std::pair<bool, uint8_t> seen{again == b, again[0]};
  g_buffer_complete(nullptr, 0, again, size, 0);
  return seen;
}

}  // namespace

TEST_CASE("activity buffers go out zeroed and CUPTI is told so; a returned one is cleared before it goes out again") {
  FakeCupti* fake = new FakeCupti;  // owned by the collector's state from here on
  Config cfg = start_fake_session(fake, "zeroed_buffers", "default", 64);
  REQUIRE((g_buffer_request && g_buffer_complete));
  // CUPTI would otherwise clear every buffer itself, on the thread that asked for it.
  CHECK(fake->attributes.at(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER) == 1);

  constexpr size_t kBytes = 64 * 1024;
  std::vector<uint8_t*> out;
  for (int i = 0; i < 4; ++i) {  // more than the pool held at start
    uint8_t* b = nullptr;
    size_t size = 0, max_records = 1;
    g_buffer_request(&b, &size, &max_records);
    REQUIRE(b != nullptr);
    CHECK(size == kBytes);
    CHECK(max_records == 0);
    CHECK(reinterpret_cast<uintptr_t>(b) % 8 == 0);
    CHECK(all_zero(b, size));
    out.push_back(b);
  }
  // CUPTI fills part of each (what it reports as valid) and hands it back.
  for (size_t i = 0; i < out.size(); ++i) {
    std::memset(out[i], 0xab, 1000 * (i + 1));
    g_buffer_complete(nullptr, 0, out[i], kBytes, 1000 * (i + 1));
  }
  for (int i = 0; i < 4; ++i) {
    uint8_t* b = nullptr;
    size_t size = 0, max_records = 0;
    g_buffer_request(&b, &size, &max_records);
    REQUIRE(b != nullptr);
    CHECK(std::find(out.begin(), out.end(), b) != out.end());  // reused from the pool
    CHECK(all_zero(b, size));
    g_buffer_complete(nullptr, 0, b, kBytes, 0);
  }

  // A benchmark can ask for CUPTI's own way: the attribute goes back to 0 and buffers are no longer cleared.
  CHECK(inferscope_cupti_set_buffer_policy(0, 0) == 0);
  CHECK(fake->attributes.at(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER) == 0);
  CHECK(reuse_after_write(0xab) == std::make_pair(true, uint8_t(0xab)));  // CUPTI clears it itself now
  // Back to zeroed buffers: whatever the pool held is not handed out dirty.
  CHECK(inferscope_cupti_set_buffer_policy(0, 1) == 0);
  uint8_t* again = nullptr;
  size_t size = 0, max_records = 0;
  g_buffer_request(&again, &size, &max_records);
  CHECK(all_zero(again, size));
  g_buffer_complete(nullptr, 0, again, size, 0);
  // A buffer of another size than the current setting is never handed out again.
  CHECK(inferscope_cupti_set_buffer_policy(128, 1) == 0);
  g_buffer_request(&again, &size, &max_records);
  CHECK(size == 128 * 1024);
  CHECK(all_zero(again, size));
  g_buffer_complete(nullptr, 0, again, size, 0);

  REQUIRE(inferscope::stop());
  set_api_factory_for_test(nullptr);
  ::unlink(cfg.output.c_str());
}

TEST_CASE("a CUPTI that refuses the zeroed-buffer attribute clears the buffers itself; the collector does not") {
  FakeCupti* fake = new FakeCupti;
  fake->refuse_zeroed = true;
  Config cfg = start_fake_session(fake, "unzeroed_buffers", "default", 64);
  CHECK(std::string(inferscope_cupti_status()).rfind("on: CUPTI", 0) == 0);
  CHECK(inferscope_cupti_set_buffer_policy(0, 1) == -1);  // refused: the caller learns it
  REQUIRE((g_buffer_request && g_buffer_complete));
  CHECK(reuse_after_write(0xcd) == std::make_pair(true, uint8_t(0xcd)));  // not cleared by the collector: CUPTI does
  REQUIRE(inferscope::stop());
  set_api_factory_for_test(nullptr);
  ::unlink(cfg.output.c_str());
}

namespace {

// A CUPTI over a driver that answers device queries only once `up` is set, like a session started in-process
// before the program initialised CUDA. One device: "Fake GPU" at PCI 0000:3b:00.
class LateDriverCupti : public FakeCupti {
 public:
  std::atomic<bool> up{false};
  std::atomic<int> count_queries{0};
  CUresult cuDeviceGetCount(int* n) override {
    ++count_queries;
    if (!up) return CUDA_ERROR_NOT_INITIALIZED;
    *n = 1;
    return CUDA_SUCCESS;
  }
  CUresult cuDeviceGet(CUdevice* d, int i) override {
    *d = i;
    return up ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
  }
  CUresult cuDeviceGetName(char* name, int len, CUdevice) override {
    std::snprintf(name, size_t(len), "Fake GPU");
    return CUDA_SUCCESS;
  }
  CUresult cuDeviceGetAttribute(int* v, CUdevice_attribute a, CUdevice) override {
    *v = a == CU_DEVICE_ATTRIBUTE_PCI_BUS_ID ? 0x3b : 0;
    return CUDA_SUCCESS;
  }
};

}  // namespace

TEST_CASE("device info is written once the driver can say: a query before CUDA is initialised is tried again") {
  LateDriverCupti* fake = new LateDriverCupti;
  runtime::set_cuda_device_locations({});
  Config cfg = start_fake_session(fake, "late_driver");
  // The writer's first clock-check round asks before the driver is up.
  for (int i = 0; i < 300 && fake->count_queries.load() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  REQUIRE(fake->count_queries.load() >= 1);
  CHECK(runtime::cuda_device_locations().empty());
  fake->up = true;
  REQUIRE(inferscope::stop());  // stop's round asks again

  dump::DumpReader r(cfg.output);
  std::map<std::string, std::string> info;
  for (auto& [k, v] : r.process_info()) info[k] = v;
  CHECK(info["gpu.count"] == "1");
  CHECK(info["gpu.0.name"] == "Fake GPU");
  CHECK(info["gpu.0.pci_location"] == "0000:3b:00");
  CHECK(runtime::cuda_device_locations() == std::vector<std::string>{"0000:3b:00"});
  runtime::set_cuda_device_locations({});
  set_api_factory_for_test(nullptr);
  ::unlink(cfg.output.c_str());
}

namespace {
// A CUPTI whose callback function the test can call, as the driver would (resource callbacks).
struct CallbackFake : FakeCupti {
  CUpti_CallbackFunc callback = nullptr;
  CUcontext current = nullptr;  // what cuCtxGetCurrent says: non-null = CUDA was in use before the session
  CUptiResult cuptiSubscribe(CUpti_SubscriberHandle* s, CUpti_CallbackFunc f, void* u) override {
    callback = f;
    return FakeCupti::cuptiSubscribe(s, f, u);
  }
  CUresult cuCtxGetCurrent(CUcontext* c) override {
    *c = current;
    return CUDA_SUCCESS;
  }
  bool graph_trace() { return enabled[CUPTI_ACTIVITY_KIND_GRAPH_TRACE]; }
  void graph_instantiated() {
    CUpti_ResourceData rd{};
    callback(nullptr, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED, &rd);
  }
};
}  // namespace

TEST_CASE("CUDA graphs at graph level only where no graph was instantiated without it (CUPTI crashes on those)") {
  auto* fake = new CallbackFake;
  Config cfg = start_fake_session(fake, "fake_cupti_graphs");
  REQUIRE(bool(fake->callback));
  // CUDA not in use before the session: graph-level tracing on, and graphs instantiated now are safe.
  CHECK(fake->graph_trace());
  fake->graph_instantiated();
  // It stays on between sessions, so graphs instantiated then stay safe too ...
  REQUIRE(inferscope::stop());
  CHECK(fake->graph_trace());
  CHECK_FALSE(fake->enabled[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL]);
  fake->graph_instantiated();
  REQUIRE(inferscope::start(cfg));
  CHECK(fake->graph_trace());
  CHECK(std::string(inferscope_cupti_status()).find("node by node") == std::string::npos);
  // ... stays on where nothing recorded needs it off (switching it off would cost every launch of the graphs
  // instantiated with it on) ...
  CHECK(inferscope_cupti_set_activities("none") == 0);
  CHECK(fake->graph_trace());
  CHECK_FALSE(fake->enabled[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL]);
  // ... and goes off where the nodes are recorded one by one.
  CHECK(inferscope_cupti_set_activities("kernel") == 0);
  CHECK_FALSE(fake->graph_trace());
  CHECK(inferscope_cupti_set_activities("default") == 0);
  CHECK(fake->graph_trace());
  CHECK(inferscope_cupti_set_activities("default,graph_nodes") == 0);
  CHECK_FALSE(fake->graph_trace());
  CHECK(fake->enabled[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL]);
  // A graph instantiated now was set up without it: graph-level tracing never comes back; the status says why.
  fake->graph_instantiated();
  CHECK(inferscope_cupti_set_activities("default") == 0);
  CHECK_FALSE(fake->graph_trace());
  CHECK(fake->enabled[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL]);
  const std::string status = inferscope_cupti_status();
  CHECK_MESSAGE(status.find("CUDA graphs node by node, not at graph level: a graph was instantiated while "
                            "graph-level tracing was off") != std::string::npos, status);
  REQUIRE(inferscope::stop());
  ::unlink(cfg.output.c_str());
}

TEST_CASE("a session started after the program initialised CUDA records graph nodes one by one, and says why") {
  auto* fake = new CallbackFake;
  fake->current = reinterpret_cast<CUcontext>(0x1234);
  Config cfg = start_fake_session(fake, "fake_cupti_graphs_late");
  CHECK_FALSE(fake->graph_trace());
  CHECK(fake->enabled[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL]);
  const std::string status = inferscope_cupti_status();
  CHECK_MESSAGE(status.find("CUDA was in use before GPU collection attached") != std::string::npos, status);
  REQUIRE(inferscope::stop());
  dump::DumpReader r(cfg.output);
  bool said = false;
  for (auto& [k, v] : r.collector_status()) said |= k == "cupti" && v.find("graphs may predate it") != std::string::npos;
  CHECK(said);
  ::unlink(cfg.output.c_str());
}

TEST_CASE("sampled mode: CUPTI stays subscribed and its activity kinds are enabled only inside windows") {
  // The writer thread switches the kinds while this thread watches: the kernel kind through an atomic.
  struct Watched : FakeCupti {
    std::atomic<bool> kernel_on{false};
    CUptiResult cuptiActivityEnable(CUpti_ActivityKind k) override {
      if (k == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) kernel_on = true;
      return FakeCupti::cuptiActivityEnable(k);
    }
    CUptiResult cuptiActivityDisable(CUpti_ActivityKind k) override {
      if (k == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) kernel_on = false;
      return FakeCupti::cuptiActivityDisable(k);
    }
  };
  Watched* fake = new Watched;
  set_api_factory_for_test([fake] { return std::unique_ptr<CuptiApi>(fake); });
  Config cfg;
  cfg.output = temp_path("fake_cupti_sampled");
  cfg.cupti = true;
  cfg.system = false;
  cfg.python = false;
  cfg.mode = CaptureMode::kSampled;
  cfg.window_steps = 3;
  cfg.window_every_steps = 5;
  cfg.slow_step_factor = 0;
  REQUIRE(inferscope::start(cfg));
  CHECK_MESSAGE(std::string(inferscope_cupti_status()).find("inside sampled windows only") != std::string::npos,
                inferscope_cupti_status());
  CHECK_FALSE(fake->kernel_on.load());  // subscribed, no kernels recorded yet
  // Graph-level tracing is on from the start, so that graphs instantiated before a window can be traced in it.
  CHECK(fake->enabled[CUPTI_ACTIVITY_KIND_GRAPH_TRACE]);
  // A specification changed between windows takes effect at the next window, not now.
  CHECK(inferscope_cupti_set_activities("minimal") == 0);
  CHECK_FALSE(fake->kernel_on.load());
  auto step = [] {
    { ISCOPE_RANGE("step"); }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  };
  bool seen_on = false, seen_off_after = false;
  for (int i = 0; i < 40 && !seen_off_after; ++i) {
    step();
    const bool on = fake->kernel_on.load();
    if (i < 4) CHECK_FALSE(on);  // the first window is due after the fifth step
    seen_on |= on;
    seen_off_after = seen_on && !on;
  }
  CHECK(seen_on);
  CHECK(seen_off_after);
  REQUIRE(inferscope::stop());
  dump::DumpReader r(cfg.output);
  REQUIRE(r.is_sampled());
  CHECK(r.sampling()->summary.windows_opened >= 1);
  ::unlink(cfg.output.c_str());
}
