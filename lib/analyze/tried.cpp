// Stage "tried" (tried.hpp).
#include "analyze/tried.hpp"

#include <boost/json.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>

namespace inferscope::analyze::detail {

namespace {

namespace json = boost::json;
namespace fs = std::filesystem;

// run.iscope -> run.try.json; run.try/base.1.iscope -> run.try.json.
std::string result_file_of(const std::string& dump_path) {
  const fs::path p(dump_path);
  const fs::path parent = p.parent_path();
  if (parent.extension() == ".try") return parent.string() + ".json";
  fs::path stem = p;
  stem.replace_extension();
  return stem.string() + ".try.json";
}

double number(const json::object& o, const char* key) {
  const json::value* v = o.if_contains(key);
  if (!v || !v->is_number()) throw std::runtime_error(std::string("field '") + key + "' is missing or not a number");
  return v->to_number<double>();
}

std::string text(const json::object& o, const char* key) {
  const json::value* v = o.if_contains(key);
  if (!v || !v->is_string()) throw std::runtime_error(std::string("field '") + key + "' is missing or not a string");
  return std::string(v->as_string());
}

}  // namespace

std::vector<TryResult> read_try_results(const std::string& dump_path, std::vector<std::string>& warnings) {
  if (dump_path.empty()) return {};  // a trace held in memory has no folder to look in
  const std::string file = result_file_of(dump_path);
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) return {};
  std::ifstream in(file, std::ios::binary);
  const std::string body((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  try {
    const json::value v = json::parse(body);
    const json::object& o = v.as_object();
    const json::value* refused = o.if_contains("refused");
    if (refused && !refused->is_null()) return {};
    TryResult r;
    const json::value* knobs = o.if_contains("knobs");
    if (!knobs || !knobs->is_array()) throw std::runtime_error("field 'knobs' is missing or not an array");
    for (const json::value& k : knobs->as_array()) {
      if (!k.is_object()) throw std::runtime_error("field 'knobs' holds something other than objects");
      r.knobs.emplace_back(text(k.as_object(), "name"), text(k.as_object(), "value"));
      r.measured.knobs += (r.measured.knobs.empty() ? "" : " ") + r.knobs.back().first + "=" + r.knobs.back().second;
    }
    r.measured.command = text(o, "command");
    r.measured.pairs = size_t(number(o, "pairs"));
    r.measured.saving_pct = number(o, "saving_pct");
    r.measured.low_pct = number(o, "saving_low_pct");
    r.measured.high_pct = number(o, "saving_high_pct");
    const json::value* m = o.if_contains("measurable");
    if (!m || !m->is_bool()) throw std::runtime_error("field 'measurable' is missing or not true/false");
    r.measured.measurable = m->as_bool();
    if (r.measured.pairs == 0) return {};
    return {r};
  } catch (const std::exception& e) {
    warnings.push_back(file + ": the --try result beside the dump was not read: " + e.what());
    return {};
  }
}

void attach_try_results(std::vector<Finding>& findings, const std::vector<TryResult>& tried) {
  for (Finding& f : findings)
    for (Suggestion& s : f.suggestions) {
      if (s.try_knob.empty()) continue;
      const std::string knob = s.try_knob.substr(0, s.try_knob.find('='));
      for (const TryResult& r : tried)
        for (const auto& [name, value] : r.knobs)
          if (name == knob) s.measured = r.measured;
    }
}

}  // namespace inferscope::analyze::detail
