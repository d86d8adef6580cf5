// Every key path of a JSON document, for the tests that hold the JSON report against its schema doc and against
// the SQLite export: "steps.candidates[].kind" is the key `kind` of an object inside the array at `steps.candidates`.
#pragma once

#include <boost/json.hpp>

#include <set>
#include <string>

namespace inferscope::testsupport {

struct JsonKeys {
  /// Every key's path, objects and arrays included.
  std::set<std::string> paths;
  /// The paths that hold a value, not an object with keys: numbers, strings, booleans, null, arrays of those (as
  /// "x[]"), empty objects and arrays, and the objects whose keys are data.
  std::set<std::string> leaves;
};

/// Walks `v`, adding its key paths to `out`. An object at a path in `data_keyed` has data for keys (process facts,
/// drop reasons, metric names): its path counts, its keys do not.
inline void collect_json_keys(const boost::json::value& v, const std::string& path, const std::set<std::string>& data_keyed,
                              JsonKeys& out) {
  if (v.is_object()) {
    const auto& o = v.get_object();
    if (o.empty() || data_keyed.count(path)) {
      out.leaves.insert(path);
      return;
    }
    for (const auto& kv : o) {
      const std::string p = path.empty() ? std::string(kv.key()) : path + "." + std::string(kv.key());
      out.paths.insert(p);
      collect_json_keys(kv.value(), p, data_keyed, out);
    }
  } else if (v.is_array()) {
    const auto& a = v.get_array();
    if (a.empty()) out.leaves.insert(path + "[]");
    for (const auto& e : a) collect_json_keys(e, path + "[]", data_keyed, out);
  } else {
    out.leaves.insert(path);
  }
}

}  // namespace inferscope::testsupport
