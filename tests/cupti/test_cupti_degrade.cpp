// Degrade, never crash: no CUPTI, no driver, another CUPTI subscriber. Each case
// leaves one clear status line and a complete CPU-only dump.
#include "collect/cupti/cupti_collector.hpp"
#include "dump/reader.hpp"

#include <inferscope/scope.hpp>

#include <doctest/doctest.h>

#include <stdlib.h>
#include <unistd.h>

#include <string>

using namespace inferscope;
using namespace inferscope::cupti;

namespace {

std::string temp_path(const char* name) {
  return std::string(INFERSCOPE_BINARY_DIR) + "/tests/cupti/" + name + "." + std::to_string(::getpid()) + ".iscope";
}

// Runs a session with a CPU range and returns the cupti status the dump holds; checks the dump is whole.
std::string session_status(const char* name) {
  Config cfg;
  cfg.output = temp_path(name);
  cfg.cupti = true;
  cfg.system = false;
  cfg.python = false;
  REQUIRE(inferscope::start(cfg));
  { ISCOPE_RANGE("cpu_work"); }
  REQUIRE(inferscope::stop());
  dump::DumpReader r(cfg.output);
  CHECK(r.complete());
  int ranges = 0, gpu = 0;
  r.for_each_record([&](uint32_t, const RecordHeader& h, const uint8_t*) {
    ranges += h.kind == RecordKind::kRange;
    gpu += static_cast<int>(h.kind) >= 32 && static_cast<int>(h.kind) < 48;
  });
  CHECK(ranges == 1);
  CHECK(gpu == 0);
  std::string status;
  for (auto& [k, v] : r.collector_status())
    if (k == "cupti") status = v;
  ::unlink(cfg.output.c_str());
  return status;
}

struct MissingCupti : CuptiApi {
  MissingCupti() { load_error = "CUPTI library not found (libcupti.so.13: cannot open shared object file)"; }
};

struct OtherSubscriber : CuptiApi {
  CUptiResult cuptiSubscribe(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*) override {
    return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  }
};

struct OtherSubscriberV2 : CuptiApi {
  bool has_subscribe_v2() const override { return true; }
  CUptiResult cuptiSubscribe_v2(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*, CUpti_SubscriberParams* p) override {
    std::snprintf(p->oldSubscriberName, p->oldSubscriberSize, "Nsight Systems");
    return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  }
};

struct NoDevice : CuptiApi {
  std::string result_string(CUptiResult) override { return "CUPTI_ERROR_INVALID_DEVICE"; }
  CUptiResult cuptiSubscribe(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*) override { return CUPTI_ERROR_INVALID_DEVICE; }
};

}  // namespace

TEST_CASE("CUPTI library missing: one status line, CPU-only dump") {
  set_api_factory_for_test([] { return std::unique_ptr<CuptiApi>(new MissingCupti); });
  std::string s = session_status("missing");
  CHECK(s.rfind("off: CUPTI library not found", 0) == 0);
  set_api_factory_for_test(nullptr);
}

TEST_CASE("another CUPTI subscriber: the message names the conflict") {
  set_api_factory_for_test([] { return std::unique_ptr<CuptiApi>(new OtherSubscriber); });
  std::string s = session_status("subscriber");
  CHECK(s.rfind("off: another CUPTI subscriber", 0) == 0);
  CHECK(s.find("one at a time") != std::string::npos);
  set_api_factory_for_test([] { return std::unique_ptr<CuptiApi>(new OtherSubscriberV2); });
  s = session_status("subscriber_v2");
  CHECK(s.find("(Nsight Systems)") != std::string::npos);
  set_api_factory_for_test(nullptr);
}

TEST_CASE("no GPU: CUPTI refuses to start, the session goes on") {
  set_api_factory_for_test([] { return std::unique_ptr<CuptiApi>(new NoDevice); });
  std::string s = session_status("nodevice");
  CHECK(s.rfind("off: CUPTI could not start (CUPTI_ERROR_INVALID_DEVICE)", 0) == 0);
  set_api_factory_for_test(nullptr);
}

TEST_CASE("the real loader with a CUPTI path that does not exist") {
  ::setenv("INFERSCOPE_CUPTI_LIBRARY", "/nonexistent/libcupti.so", 1);
  auto api = load_cupti_api();
  // Without a driver the loader stops at libcuda; with one, at the missing CUPTI.
  CHECK_FALSE(api->load_error.empty());
  const bool named = api->load_error.find("no NVIDIA driver") == 0 ||
                     api->load_error.find("CUPTI library not found (/nonexistent/libcupti.so") == 0;
  CHECK_MESSAGE(named, api->load_error);
  // Every call of an unloaded API fails instead of crashing.
  CUpti_SubscriberHandle h = nullptr;
  CHECK(api->cuptiSubscribe(&h, nullptr, nullptr) != CUPTI_SUCCESS);
  int n = 0;
  if (!api->have_driver) CHECK(api->cuDeviceGetCount(&n) != CUDA_SUCCESS);
  // And a whole session through the real loader still writes its CPU-only dump.
  std::string s = session_status("real_loader");
  CHECK(s.rfind("off: ", 0) == 0);
  ::unsetenv("INFERSCOPE_CUPTI_LIBRARY");
}
