// Runtime internals shared by the runtime's own source files.
#pragma once

#include "runtime/runtime.hpp"

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace inferscope::runtime {

void choose_clock();
/// The text of string id `id` ("" when unknown). Takes the string table's lock: not for hot paths.
std::string string_of(uint32_t id);
/// The qualified name of Python code id `code_id` ("" when unknown). Takes the table's lock: not for hot paths.
std::string code_qualname(uint32_t code_id);
void strings_since(uint32_t first, const std::function<void(uint32_t, std::string_view)>& f, uint32_t* next);
void code_since(uint32_t first, const std::function<void(const dump::CodeEntry&)>& f, uint32_t* next);

/// fork(): the string table's lock is taken before fork and released after it (made fresh in the child).
void strings_lock_for_fork();
void strings_unlock_after_fork(bool in_child);

/// Starts a session on behalf of the environment (INFERSCOPE_ENABLE=1): like start(), plus SIGINT/SIGTERM
/// handlers that write the dump before the signal's default action. Forked children (follow_children) name
/// their dumps after `family_output` (<stem>.<pid>.iscope); "" means the session's own output.
bool start_from_environment(const Config& config, const std::string& family_output = {});

/// start() and start_from_environment(); `fork_child`: called from fork's child handler (no Python collector).
bool start_session(const Config& config, bool from_env, const std::string& family_output, bool fork_child);

/// inferscope::start(config): every field `code` set (one that differs from a default Config) wins; every other
/// setting comes from the environment, .inferscope.yaml and the defaults, as for INFERSCOPE_ENABLE=1. A
/// configuration error is logged ("configuration error: ...; not recording") and nothing starts.
bool start_from_code(const Config& code);

/// Registers the collectors compiled into this library (once).
void ensure_builtin_collectors();
/// Starts a session if INFERSCOPE_ENABLE asks for one; false otherwise (or on a configuration error).
bool autostart_from_environment();

/// What a recording hands to the program an exec makes of this process (docs/reliability.md, "exec").
struct ExecHandover {
  bool had_session = false;
  /// "NAME=value" for the new image's environment: INFERSCOPE_EXEC_FROM=<pid>; INFERSCOPE_EXEC_EMPTY=1 when the
  /// dump holds nothing of the program (a shim: env, bash, pyenv), so the new image replaces it instead of keeping
  /// it aside; the live page's listening socket and token.
  std::vector<std::string> environment;
  int live_fd = -1;  ///< the live page's socket, inheritable; to be closed when the exec fails
};
/// Stops this process's session before an exec: the dump completed, no report (the new image writes it), the live
/// page's socket kept open for the new image. Nothing when this process owns no running session (a vfork child).
ExecHandover stop_for_exec();

/// When the library loads: the live page an exec handed to this image, taken out of the environment (live.cpp).
void take_inherited_live();
/// After autostart: a page handed over that no session took is closed (its clients are refused, not left waiting).
void close_unused_inherited_live();

/// Logging to stderr, prefixed "inferscope: ", filtered by the session's log level.
void log(LogLevel level, const std::string& message);

}  // namespace inferscope::runtime
