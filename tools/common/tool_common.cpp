#include "tool_common.hpp"

#include "config/settings.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <iostream>
#include <optional>

namespace inferscope::tools {

std::shared_ptr<cxxopts::Value> boolean_flag() { return cxxopts::value<std::string>()->implicit_value("true"); }

std::string parse_boolean_flag(const std::string& flag, const std::string& value, bool& on) {
  const std::optional<bool> b = config::parse_boolean(value);
  if (!b)
    return "--" + flag + "=" + value + ": '" + value + "' is not a boolean (" + std::string(config::kBooleanSpellings) + ")";
  on = *b;
  return "";
}

std::string BooleanFlags::parse(const cxxopts::ParseResult& args) {
  for (const std::string& name : names_) {
    if (!args.count(name)) continue;
    bool on = false;
    if (std::string bad = parse_boolean_flag(name, args[name].as<std::string>(), on); !bad.empty()) return bad;
    on_[name] = on;
  }
  return "";
}

bool BooleanFlags::on(const std::string& name) const {
  auto it = on_.find(name);
  return it != on_.end() && it->second;
}

int exit_status_after_stdout(const char* tool, int status) {
  errno = 0;
  std::cout.flush();
  const bool failed = std::fflush(stdout) != 0 || std::ferror(stdout) || !std::cout;
  if (!failed) return status;
  // errno is the failed write's when one of the flushes above did it; a stream that failed earlier may have lost it.
  const int e = errno;
  std::cerr << tool << ": cannot write to standard output" << (e ? std::string(": ") + std::strerror(e) : "") << "\n";
  return status == 0 ? 1 : status;
}

int guarded_main(const char* tool, int (*run)(int, char**), int argc, char** argv) {
  int status = 1;
  try {
    status = run(argc, argv);
  } catch (const std::bad_alloc&) {
    std::cerr << tool << ": out of memory (docs/reliability.md, \"Memory bounds\")\n";
  } catch (const std::exception& e) {
    std::cerr << tool << ": " << e.what() << "\n";
  } catch (...) {  // an error of a library's own type (muparser's ParserError is no std::exception)
    std::cerr << tool << ": an unexpected error ended it (not a std::exception)\n";
  }
  return exit_status_after_stdout(tool, status);
}

}  // namespace inferscope::tools
