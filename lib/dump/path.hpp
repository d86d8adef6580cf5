// File-name helpers shared by the runtime (per-process and snapshot dump names) and the tools (report
// format by extension): one definition of where a path's extension starts.
//
//   dump::insert_suffix("out/run.iscope", "4242")            -> "out/run.4242.iscope"
//   dump::insert_suffix("out/run", "flush1", ".iscope")      -> "out/run.flush1.iscope"
//   dump::split_extension("a.d/report.HTML").ext             -> ".HTML"
#pragma once

#include <string>

namespace inferscope::dump {

struct PathParts {
  std::string stem;  ///< everything before the extension
  std::string ext;   ///< from the last '.' of the file name on ("" when the file name has none)
};

/// Splits off the extension: the last '.' after the last '/' (a dot in a directory name is no extension).
inline PathParts split_extension(const std::string& path) {
  const auto dot = path.rfind('.');
  const auto slash = path.rfind('/');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return {path, ""};
  return {path.substr(0, dot), path.substr(dot)};
}

/// `path` with "." + `suffix` before its extension; a path without one gets `default_ext` after the suffix.
inline std::string insert_suffix(const std::string& path, const std::string& suffix,
                                 const std::string& default_ext = "") {
  PathParts p = split_extension(path);
  return p.stem + "." + suffix + (p.ext.empty() ? default_ext : p.ext);
}

}  // namespace inferscope::dump
