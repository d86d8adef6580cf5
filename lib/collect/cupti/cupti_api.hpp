// The CUPTI and CUDA driver functions the GPU collector uses, behind an interface (like Kineto's
// CuptiActivityApi) so translation and every degrade path can be tested on a machine without a GPU.
//
// The real implementation opens libcupti and libcuda at run time with dlopen: libinferscope.so has no link
// dependency on either, so it loads on machines without a driver.
#pragma once

#include <cuda.h>
#include <cupti.h>

#include <memory>
#include <string>

namespace inferscope::cupti {

// X(name, parameter list, argument list). Methods are named after the C functions they forward to. A function
// the loaded library lacks leaves its pointer null and fails like the defaults below (CUPTI_ERROR_NOT_INITIALIZED):
// cuptiSubscribe_v2 and cuptiSetThreadIdType are optional, the collector copes without them.
#define INFERSCOPE_CUPTI_FUNCTIONS(X)                                                                          \
  X(cuptiSubscribe, (CUpti_SubscriberHandle * s, CUpti_CallbackFunc f, void* u), (s, f, u))                  \
  X(cuptiSubscribe_v2, (CUpti_SubscriberHandle * s, CUpti_CallbackFunc f, void* u, CUpti_SubscriberParams* p), \
    (s, f, u, p))                                                                                            \
  X(cuptiUnsubscribe, (CUpti_SubscriberHandle s), (s))                                                       \
  X(cuptiEnableCallback, (uint32_t e, CUpti_SubscriberHandle s, CUpti_CallbackDomain d, CUpti_CallbackId c), \
    (e, s, d, c))                                                                                            \
  X(cuptiEnableDomain, (uint32_t e, CUpti_SubscriberHandle s, CUpti_CallbackDomain d), (e, s, d))            \
  X(cuptiGetCallbackName, (CUpti_CallbackDomain d, uint32_t c, const char** n), (d, c, n))                   \
  X(cuptiActivityEnable, (CUpti_ActivityKind k), (k))                                                        \
  X(cuptiActivityDisable, (CUpti_ActivityKind k), (k))                                                       \
  X(cuptiActivityRegisterCallbacks, (CUpti_BuffersCallbackRequestFunc r, CUpti_BuffersCallbackCompleteFunc c), \
    (r, c))                                                                                                  \
  X(cuptiActivityRegisterTimestampCallback, (CUpti_TimestampCallbackFunc f), (f))                            \
  X(cuptiActivityFlushAll, (uint32_t f), (f))                                                                \
  X(cuptiActivityEnableRuntimeApi, (CUpti_CallbackId c, uint8_t e), (c, e))                                  \
  X(cuptiActivityEnableDriverApi, (CUpti_CallbackId c, uint8_t e), (c, e))                                   \
  X(cuptiActivityFlushPeriod, (uint32_t t), (t))                                                             \
  X(cuptiActivityGetNextRecord, (uint8_t * b, size_t n, CUpti_Activity * *r), (b, n, r))                     \
  X(cuptiActivityGetNumDroppedRecords, (CUcontext c, uint32_t s, size_t * n), (c, s, n))                     \
  X(cuptiActivitySetAttribute, (CUpti_ActivityAttribute a, size_t * n, void* v), (a, n, v))                  \
  X(cuptiGetDeviceId, (CUcontext c, uint32_t * d), (c, d))                                                   \
  X(cuptiGetContextId, (CUcontext c, uint32_t * d), (c, d))                                                  \
  X(cuptiSetThreadIdType, (CUpti_ActivityThreadIdType t), (t))

#define INFERSCOPE_DRIVER_FUNCTIONS(X)                                                        \
  X(cuDriverGetVersion, (int* v), (v))                                                        \
  X(cuDeviceGetCount, (int* n), (n))                                                          \
  X(cuDeviceGet, (CUdevice * d, int i), (d, i))                                               \
  X(cuDeviceGetName, (char* n, int len, CUdevice d), (n, len, d))                             \
  X(cuDeviceGetAttribute, (int* v, CUdevice_attribute a, CUdevice d), (v, a, d))              \
  X(cuDeviceTotalMem_v2, (size_t * b, CUdevice d), (b, d))                                    \
  X(cuCtxGetCurrent, (CUcontext * c), (c))                                                    \
  X(cuDevicePrimaryCtxGetState, (CUdevice d, unsigned* flags, int* active), (d, flags, active)) \
  X(cuCtxPushCurrent_v2, (CUcontext c), (c))                                                  \
  X(cuCtxPopCurrent_v2, (CUcontext * c), (c))                                                 \
  X(cuStreamCreate, (CUstream * s, unsigned f), (s, f))                                       \
  X(cuMemAlloc_v2, (CUdeviceptr * p, size_t n), (p, n))                                       \
  X(cuMemsetD8Async, (CUdeviceptr p, unsigned char v, size_t n, CUstream s), (p, v, n, s))    \
  X(cuStreamSynchronize, (CUstream s), (s))

/// The functions the collector calls. Every method of this base class fails as if the library were absent
/// (CUPTI_ERROR_NOT_INITIALIZED / CUDA_ERROR_NOT_INITIALIZED); tests derive and override what they fake.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"  // the failing defaults ignore their arguments
class CuptiApi {
 public:
  virtual ~CuptiApi() = default;
#define INFERSCOPE_DECLARE_CUPTI(name, params, args) \
  virtual CUptiResult name params { return CUPTI_ERROR_NOT_INITIALIZED; }
  INFERSCOPE_CUPTI_FUNCTIONS(INFERSCOPE_DECLARE_CUPTI)
#undef INFERSCOPE_DECLARE_CUPTI
#define INFERSCOPE_DECLARE_DRIVER(name, params, args) \
  virtual CUresult name params { return CUDA_ERROR_NOT_INITIALIZED; }
  INFERSCOPE_DRIVER_FUNCTIONS(INFERSCOPE_DECLARE_DRIVER)
#undef INFERSCOPE_DECLARE_DRIVER
  /// Whether cuptiSubscribe_v2 exists (it names a conflicting subscriber).
  virtual bool has_subscribe_v2() const { return false; }
  /// Text for a CUPTI result ("CUPTI_ERROR_..." and its description where the library gives one).
  virtual std::string result_string(CUptiResult r);
  /// Where the library came from (for the status line), or why it could not be loaded ("" when fine).
  std::string origin;
  std::string load_error;
  /// Whether the driver (libcuda) could be loaded; false means "no NVIDIA driver on this machine".
  bool have_driver = false;
};
#pragma GCC diagnostic pop

/// Loads libcuda and libcupti with dlopen. Never throws: on failure, the returned object's `load_error`
/// says what is missing. CUPTI is searched at INFERSCOPE_CUPTI_LIBRARY (only there, when set), then as
/// libcupti.so.13 / libcupti.so on the loader path, then in $CUDA_HOME/lib64, /usr/local/cuda/lib64 and
/// /usr/local/cuda/extras/CUPTI/lib64.
std::unique_ptr<CuptiApi> load_cupti_api();

/// Whether libcuda is already loaded in this process (CUDA initialised or about to be).
bool driver_already_loaded();

}  // namespace inferscope::cupti
