// Runtime internals shared by the runtime's own source files.
#pragma once

#include "runtime/runtime.hpp"

#include <functional>
#include <string_view>
#include <utility>

namespace inferscope::runtime {

void choose_clock();
void strings_since(uint32_t first, const std::function<void(uint32_t, std::string_view)>& f, uint32_t* next);
void code_since(uint32_t first, const std::function<void(const dump::CodeEntry&)>& f, uint32_t* next);

/// Starts a session on behalf of the environment (INFERSCOPE_ENABLE=1): like start(), plus SIGINT/SIGTERM
/// handlers that write the dump before the signal's default action.
bool start_from_environment(const Config& config);

/// Registers the collectors compiled into this library (once).
void ensure_builtin_collectors();
/// Starts a session if INFERSCOPE_ENABLE asks for one; false otherwise (or on a configuration error).
bool autostart_from_environment();

/// Logging to stderr, prefixed "inferscope: ", filtered by the session's log level.
void log(LogLevel level, const std::string& message);

}  // namespace inferscope::runtime
