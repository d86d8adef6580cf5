// nvtx_emit's NVTX half: the ISCOPE ranges a session pushes to NVTX arrive at the NVTX tool (here nvtx_probe,
// loaded through NVTX_INJECTION64_PATH as Nsight Systems would be), in the InferScope domain, named and nested
// as recorded, each push with its pop; none once the session stopped. Apart from test_nvtx because NVTX loads
// one tool per process, and there it is libinferscope itself, which leaves its own domain out.
#include <inferscope/scope.hpp>

#include <doctest/doctest.h>

#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>

using namespace inferscope;

TEST_CASE("ISCOPE ranges emitted to NVTX arrive at the NVTX tool, named and nested, only while recording") {
  // Before the first NVTX call of the process: NVTX reads the variable once, when it initialises.
  ::setenv("NVTX_INJECTION64_PATH", NVTX_PROBE_LIB, 1);
  Config cfg;
  cfg.output = std::string(INFERSCOPE_BINARY_DIR) + "/tests/cupti/nvtx_emit." + std::to_string(::getpid()) + ".iscope";
  cfg.cupti = false;
  cfg.system = false;
  cfg.python = false;
  cfg.nvtx_capture = false;
  cfg.nvtx_emit = true;
  REQUIRE(inferscope::start(cfg));
  {
    ISCOPE_RANGE("iscope_outer");
    { ISCOPE_RANGE("iscope_inner"); }
    { ISCOPE_RANGE("iscope_second"); }
  }
  REQUIRE(inferscope::stop());
  { ISCOPE_RANGE("iscope_after_stop"); }
  ::unlink(cfg.output.c_str());

  void* probe = ::dlopen(NVTX_PROBE_LIB, RTLD_NOW | RTLD_NOLOAD);
  REQUIRE_MESSAGE(probe != nullptr, "NVTX did not load the tool at " NVTX_PROBE_LIB);
  auto log = reinterpret_cast<const char* (*)()>(::dlsym(probe, "nvtx_probe_log"));
  REQUIRE_MESSAGE(bool(log), "nvtx_probe_log not found");
  CHECK(std::string(log()) ==
        "push InferScope/iscope_outer 0\n"
        "push InferScope/iscope_inner 1\n"
        "pop InferScope\n"
        "push InferScope/iscope_second 1\n"
        "pop InferScope\n"
        "pop InferScope\n");
}
