// NVTX: capturing the ranges and marks an application emits (NVTX injection) and emitting ISCOPE ranges as
// NVTX ranges (Config::nvtx_emit). Neither needs a GPU or CUPTI. docs/gpu-collector.md explains the design.
#pragma once

namespace inferscope::cupti {

/// Registers the "nvtx" collector (capture and emit switches follow the session's Config).
void register_nvtx_collector();

}  // namespace inferscope::cupti

extern "C" {
/// NVTX's injection entry point (NVTX_INJECTION64_PATH=libinferscope.so): installs the capture handlers.
int InitializeInjectionNvtx2(const void* (*get_export_table)(unsigned int));
}
