// dlopen-based CuptiApi: forwards each method to the symbol of the library loaded at run time.
#include "collect/cupti/cupti_api.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace inferscope::cupti {

std::string CuptiApi::result_string(CUptiResult r) {
  return "CUPTI error " + std::to_string(static_cast<int>(r));
}

namespace {

using GetResultStringFn = CUptiResult (*)(CUptiResult, const char**);

class DlCuptiApi final : public CuptiApi {
 public:
#define INFERSCOPE_FORWARD(name, params, args)                  \
  using name##_t = decltype(&::name);                           \
  name##_t p_##name = nullptr;                                  \
  auto name params -> decltype(::name args) override {          \
    return p_##name ? p_##name args : fail_##name();            \
  }
  INFERSCOPE_CUPTI_FUNCTIONS(INFERSCOPE_FORWARD)
  INFERSCOPE_DRIVER_FUNCTIONS(INFERSCOPE_FORWARD)
#undef INFERSCOPE_FORWARD

  std::string result_string(CUptiResult r) override {
    const char* s = nullptr;
    if (p_result_string && p_result_string(r, &s) == CUPTI_SUCCESS && s) return s;
    return CuptiApi::result_string(r);
  }

  bool has_subscribe_v2() const override { return p_cuptiSubscribe_v2 != nullptr; }

  GetResultStringFn p_result_string = nullptr;

 private:
#define INFERSCOPE_FAIL(name, params, args) \
  static CUptiResult fail_##name() { return CUPTI_ERROR_NOT_INITIALIZED; }
  INFERSCOPE_CUPTI_FUNCTIONS(INFERSCOPE_FAIL)
#undef INFERSCOPE_FAIL
#define INFERSCOPE_FAIL(name, params, args) \
  static CUresult fail_##name() { return CUDA_ERROR_NOT_INITIALIZED; }
  INFERSCOPE_DRIVER_FUNCTIONS(INFERSCOPE_FAIL)
#undef INFERSCOPE_FAIL
};

void* open_first(const std::vector<std::string>& candidates, std::string& opened, std::string& last_error) {
  for (const auto& c : candidates) {
    if (void* h = ::dlopen(c.c_str(), RTLD_NOW | RTLD_GLOBAL)) {
      opened = c;
      return h;
    }
    const char* e = ::dlerror();
    if (last_error.empty()) last_error = e ? e : c + ": cannot open";  // the first, most telling reason
  }
  return nullptr;
}

}  // namespace

bool driver_already_loaded() { return ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD) != nullptr; }

std::unique_ptr<CuptiApi> load_cupti_api() {
  auto api = std::make_unique<DlCuptiApi>();
  std::string opened, err;
  void* cuda = open_first({"libcuda.so.1", "libcuda.so"}, opened, err);
  if (!cuda) {
    api->load_error = "no NVIDIA driver (libcuda.so.1 cannot be loaded: " + err + ")";
    return api;
  }
  api->have_driver = true;
  void* lib = cuda;  // INFERSCOPE_RESOLVE looks symbols up in `lib`
#define INFERSCOPE_RESOLVE(name, params, args) \
  api->p_##name = reinterpret_cast<DlCuptiApi::name##_t>(::dlsym(lib, #name));
  INFERSCOPE_DRIVER_FUNCTIONS(INFERSCOPE_RESOLVE)

  std::vector<std::string> candidates;
  if (const char* env = std::getenv("INFERSCOPE_CUPTI_LIBRARY"); env && *env) {
    candidates.emplace_back(env);
  } else {
    candidates = {"libcupti.so.13", "libcupti.so"};
    std::vector<std::string> dirs;
    if (const char* home = std::getenv("CUDA_HOME"); home && *home) dirs.push_back(std::string(home) + "/lib64/");
    dirs.push_back("/usr/local/cuda/lib64/");
    dirs.push_back("/usr/local/cuda/extras/CUPTI/lib64/");
    for (auto& d : dirs) {
      candidates.push_back(d + "libcupti.so.13");
      candidates.push_back(d + "libcupti.so");
    }
  }
  void* cupti = open_first(candidates, opened, err);
  if (!cupti) {
    api->load_error = "CUPTI library not found (" + err + "); set INFERSCOPE_CUPTI_LIBRARY";
    return api;
  }
  api->origin = opened;
  lib = cupti;
  INFERSCOPE_CUPTI_FUNCTIONS(INFERSCOPE_RESOLVE)
#undef INFERSCOPE_RESOLVE
  api->p_result_string = reinterpret_cast<GetResultStringFn>(::dlsym(cupti, "cuptiGetResultString"));
  if (!api->p_cuptiSubscribe || !api->p_cuptiActivityEnable || !api->p_cuptiActivityRegisterCallbacks)
    api->load_error = opened + " lacks the CUPTI activity API";
  return api;
}

}  // namespace inferscope::cupti
