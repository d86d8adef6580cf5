#include "trace_event_check.hpp"

#include <boost/json.hpp>
#include <boost/json/basic_parser_impl.hpp>

#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_set>

namespace inferscope::report::testing {
namespace {

namespace json = boost::json;

class Violations {
 public:
  explicit Violations(TraceCheck& c) : c_(c) {}
  void add(std::string what) {
    ++c_.violation_count;
    if (c_.violations.size() < TraceCheck::kMaxListed) c_.violations.push_back(std::move(what));
  }

 private:
  TraceCheck& c_;
};

// --- keys: a SAX pass, since a DOM parser keeps one of a repeated key without a word ---------------------

/// Notes every key repeated within one object, naming the object by its path (otherData, traceEvents[7].args).
class KeyHandler {
 public:
  static constexpr std::size_t max_object_size = std::size_t(-1);
  static constexpr std::size_t max_array_size = std::size_t(-1);
  static constexpr std::size_t max_key_size = std::size_t(-1);
  static constexpr std::size_t max_string_size = std::size_t(-1);

  explicit KeyHandler(Violations& v) : v_(v) {}

  bool on_document_begin(json::error_code&) { return true; }
  bool on_document_end(json::error_code&) { return true; }
  bool on_object_begin(json::error_code&) { return open(true); }
  bool on_object_end(std::size_t, json::error_code&) { return close(); }
  bool on_array_begin(json::error_code&) { return open(false); }
  bool on_array_end(std::size_t, json::error_code&) { return close(); }
  bool on_key_part(json::string_view s, std::size_t, json::error_code&) {
    key_.append(s.data(), s.size());
    return true;
  }
  bool on_key(json::string_view s, std::size_t, json::error_code&) {
    key_.append(s.data(), s.size());
    if (!frames_.back().keys.insert(key_).second)
      v_.add(frames_.back().path + ": key '" + key_ + "' appears more than once");
    last_key_ = std::move(key_);
    key_.clear();
    return true;
  }
  bool on_string_part(json::string_view, std::size_t, json::error_code&) { return true; }
  bool on_string(json::string_view, std::size_t, json::error_code&) { return scalar(); }
  bool on_number_part(json::string_view, json::error_code&) { return true; }
  bool on_int64(int64_t, json::string_view, json::error_code&) { return scalar(); }
  bool on_uint64(uint64_t, json::string_view, json::error_code&) { return scalar(); }
  bool on_double(double, json::string_view, json::error_code&) { return scalar(); }
  bool on_bool(bool, json::error_code&) { return scalar(); }
  bool on_null(json::error_code&) { return scalar(); }
  bool on_comment_part(json::string_view, json::error_code&) { return true; }
  bool on_comment(json::string_view, json::error_code&) { return true; }

 private:
  struct Frame {
    bool object = false;
    std::string path;
    size_t elements = 0;
    std::unordered_set<std::string> keys;
  };
  bool open(bool object) {
    std::string path = "(document)";
    if (!frames_.empty() && frames_.back().object)
      path = frames_.size() == 1 ? last_key_ : frames_.back().path + "." + last_key_;
    else if (!frames_.empty())
      path = frames_.back().path + "[" + std::to_string(frames_.back().elements++) + "]";
    frames_.push_back({object, std::move(path), 0, {}});
    return true;
  }
  bool close() {
    frames_.pop_back();
    return true;
  }
  bool scalar() {
    if (!frames_.empty() && !frames_.back().object) ++frames_.back().elements;
    return true;
  }

  Violations& v_;
  std::vector<Frame> frames_;
  std::string key_, last_key_;
};

// --- events --------------------------------------------------------------------------------------------

std::string text_of(const json::value* v) {
  if (!v) return "";
  if (v->is_string()) return std::string(v->as_string());
  return json::serialize(*v);
}

std::optional<double> number_of(const json::value* v) {
  if (!v || !v->is_number()) return std::nullopt;
  return v->to_number<double>();
}

class EventChecker {
 public:
  EventChecker(TraceCheck& c, Violations& v) : c_(c), v_(v) {}

  void event(const json::value& ev, size_t i) {
    ++c_.events;
    const std::string at = "traceEvents[" + std::to_string(i) + "]";
    if (!ev.is_object()) return v_.add(at + ": not an object");
    const json::object& o = ev.as_object();
    const std::string ph = text_of(o.if_contains("ph"));
    if (ph.empty()) return v_.add(at + ": no \"ph\"");
    const std::string where = at + " (ph '" + ph + "', name '" + text_of(o.if_contains("name")) + "')";
    if (!o.contains("pid")) v_.add(where + ": no \"pid\"");
    if (ph == "M") return;
    const std::optional<double> ts = number_of(o.if_contains("ts"));
    if (!ts || !std::isfinite(*ts)) return v_.add(where + ": \"ts\" missing or not a finite number");
    if (*ts < 0) v_.add(where + ": negative ts " + text_of(o.if_contains("ts")));
    if (ph == "X") complete(o, where);
    else if (ph == "B" || ph == "E") sync_slice(o, ph[0], *ts, where);
    else if (ph == "b" || ph == "e") async_slice(o, ph[0], where);
    else if (ph == "s" || ph == "f" || ph == "t") flow(o, ph[0], where);
    else if (ph == "C") counter(o, *ts, where);
  }

  void finish() {
    for (const auto& [track, open] : stacks_)
      if (!open.empty())
        v_.add("pid " + track.first + " tid " + track.second + ": " + std::to_string(open.size()) +
               " \"B\" events without their \"E\", the first '" + open.front().second + "'");
    for (const auto& [key, n] : async_)
      if (n != 0)
        v_.add("async '" + std::get<3>(key) + "' (cat '" + std::get<1>(key) + "', id " + std::get<2>(key) +
               "): " + std::to_string(n) + " more begins than ends");
    for (const auto& [key, n] : flows_) {
      const std::string name = "flow id " + std::get<2>(key) + " (cat '" + std::get<0>(key) + "', name '" +
                               std::get<1>(key) + "')";
      if (n.first != 1 || n.second != 1)
        v_.add(name + ": " + std::to_string(n.first) + " start(s) and " + std::to_string(n.second) +
               " finish(es), not one of each");
    }
    c_.flows = flows_.size();
    c_.counter_tracks = counters_.size();
  }

 private:
  using Track = std::pair<std::string, std::string>;  // (pid, tid) as written

  void complete(const json::object& o, const std::string& where) {
    const std::optional<double> dur = number_of(o.if_contains("dur"));
    if (!dur || !std::isfinite(*dur) || *dur < 0) v_.add(where + ": \"dur\" missing, not finite or negative");
  }
  void sync_slice(const json::object& o, char ph, double ts, const std::string& where) {
    auto& open = stacks_[{text_of(o.if_contains("pid")), text_of(o.if_contains("tid"))}];
    if (ph == 'B') {
      open.emplace_back(ts, text_of(o.if_contains("name")));
      return;
    }
    if (open.empty()) return v_.add(where + ": \"E\" without a \"B\" open on its thread");
    if (ts < open.back().first) v_.add(where + ": ends before its \"B\" began");
    open.pop_back();
  }
  void async_slice(const json::object& o, char ph, const std::string& where) {
    const std::string id = text_of(o.if_contains("id"));
    if (id.empty()) return v_.add(where + ": async event without \"id\"");
    int& n = async_[{text_of(o.if_contains("pid")), text_of(o.if_contains("cat")), id, text_of(o.if_contains("name"))}];
    n += ph == 'b' ? 1 : -1;
    if (n < 0) {
      v_.add(where + ": \"e\" without its \"b\"");
      n = 0;
    }
  }
  void flow(const json::object& o, char ph, const std::string& where) {
    const std::string id = text_of(o.if_contains("id"));
    if (id.empty()) return v_.add(where + ": flow event without \"id\"");
    auto& n = flows_[{text_of(o.if_contains("cat")), text_of(o.if_contains("name")), id}];
    if (ph == 's') ++n.first;
    if (ph == 'f') ++n.second;
  }
  void counter(const json::object& o, double ts, const std::string& where) {
    const json::value* args = o.if_contains("args");
    if (!args || !args->is_object() || args->as_object().empty())
      return v_.add(where + ": a counter without values in \"args\"");
    ++c_.counter_samples;
    for (const auto& kv : args->as_object()) {
      if (!kv.value().is_number()) v_.add(where + ": counter value '" + std::string(kv.key()) + "' is not a number");
      auto [it, fresh] = counters_.try_emplace(
          {text_of(o.if_contains("pid")), text_of(o.if_contains("name")), std::string(kv.key())}, ts);
      if (fresh) continue;
      if (ts <= it->second)
        v_.add(where + ": counter track '" + std::string(kv.key()) + "' goes back or stays in time (" +
               std::to_string(it->second) + " then " + std::to_string(ts) + " us)");
      it->second = ts;
    }
  }

  TraceCheck& c_;
  Violations& v_;
  std::map<Track, std::vector<std::pair<double, std::string>>> stacks_;
  std::map<std::tuple<std::string, std::string, std::string, std::string>, int> async_;
  std::map<std::tuple<std::string, std::string, std::string>, std::pair<int, int>> flows_;  // (starts, finishes)
  std::map<std::tuple<std::string, std::string, std::string>, double> counters_;           // -> last ts
};

}  // namespace

TraceCheck check_trace_events(std::string_view text) {
  TraceCheck c;
  Violations v(c);
  json::basic_parser<KeyHandler> keys(json::parse_options{}, v);
  json::error_code ec;
  keys.write_some(false, text.data(), text.size(), ec);
  if (ec) {
    v.add("not JSON: " + ec.message());
    return c;
  }
  const json::value root = json::parse(text);
  const json::value* events = root.is_object() ? root.as_object().if_contains("traceEvents") : nullptr;
  if (!events || !events->is_array()) {
    v.add("no \"traceEvents\" array");
    return c;
  }
  EventChecker check(c, v);
  for (size_t i = 0; i < events->as_array().size(); ++i) check.event(events->as_array()[i], i);
  check.finish();
  return c;
}

}  // namespace inferscope::report::testing
