// The Chrome trace-event JSON primitives of the Perfetto writer (perfetto.cpp, perfetto_counters.cpp): an event
// name, a buffered event writer that streams to the output as it fills, and an "args" object builder. Internal to
// lib/export.
#pragma once

#include "dump/reader.hpp"
#include "text/escape.hpp"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace inferscope::exporter::perfetto {

using text::append_json_escaped;
using text::json_quote;

/// An event name: either text still to be escaped, or JSON string content already escaped (cached names).
struct Name {
  std::string_view s;
  bool escaped = false;
  Name(std::string_view v, bool e = false) : s(v), escaped(e) {}
  Name(const std::string& v) : s(v) {}
  Name(const char* v) : s(v) {}
};

/// Appends trace events to a buffer that is flushed to the stream as it fills.
class EventWriter {
 public:
  explicit EventWriter(std::ostream& out) : out_(out) { buf_.reserve(kFlushAt + 4096); }
  ~EventWriter() { flush(); }

  std::string& raw() { return buf_; }
  /// The events written here follow others already in the stream (a run's trace, one writer per dump).
  void follow_earlier_events() { first_ = false; }
  /// Opens an event: {"ph":"X","name":"...","cat":"...","pid":..,"tid":..  (no closing brace).
  void begin(char ph, const Name& name, std::string_view cat, int64_t pid, int64_t tid) {
    open(ph, name);
    if (!cat.empty()) {
      buf_ += ",\"cat\":\"";
      append_json_escaped(buf_, cat);
      buf_ += '"';
    }
    buf_ += ",\"pid\":";
    buf_ += std::to_string(pid);
    buf_ += ",\"tid\":";
    buf_ += std::to_string(tid);
  }
  /// Opens a counter sample: {"ph":"C","name":"...","pid":..  A counter's track is its process and name, so a
  /// sample carries no tid, and no category (viewers use neither).
  void begin_counter(const Name& name, int64_t pid) {
    open('C', name);
    buf_ += ",\"pid\":";
    buf_ += std::to_string(pid);
  }
  /// ns as microseconds with 3 decimals, formatted from the integer (exact, and far faster than printf).
  void field_us(const char* key, int64_t ns) {
    buf_ += ",\"";
    buf_ += key;
    buf_ += "\":";
    uint64_t mag = ns < 0 ? 0 - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
    if (ns < 0) buf_ += '-';
    char tmp[32];
    auto r = std::to_chars(tmp, tmp + sizeof tmp, mag / 1000);
    buf_.append(tmp, r.ptr);
    const unsigned frac = static_cast<unsigned>(mag % 1000);
    const char digits[4] = {'.', char('0' + frac / 100), char('0' + frac / 10 % 10), char('0' + frac % 10)};
    buf_.append(digits, 4);
  }
  void field_raw(const char* key, std::string_view json) {
    buf_ += ",\"";
    buf_ += key;
    buf_ += "\":";
    buf_ += json;
  }
  void field_str(const char* key, std::string_view s) {
    buf_ += ",\"";
    buf_ += key;
    buf_ += "\":\"";
    append_json_escaped(buf_, s);
    buf_ += '"';
  }
  /// Closes the event opened by begin() and flushes when the buffer is full.
  void end() {
    buf_ += '}';
    if (buf_.size() >= kFlushAt) flush();
  }
  void flush() {
    out_.write(buf_.data(), static_cast<std::streamsize>(buf_.size()));
    buf_.clear();
  }

 private:
  void open(char ph, const Name& name) {
    buf_ += first_ ? "\n" : ",\n";
    first_ = false;
    buf_ += "{\"ph\":\"";
    buf_ += ph;
    buf_ += "\",\"name\":\"";
    if (name.escaped) buf_ += name.s;
    else append_json_escaped(buf_, name.s);
    buf_ += '"';
  }

  static constexpr size_t kFlushAt = 64 * 1024;
  std::ostream& out_;
  std::string buf_;
  bool first_ = true;
};

/// Builds an "args" object: {"k":v,...}.
class Args {
 public:
  Args& i(std::string_view k, int64_t v) { return key(k).append(std::to_string(v)); }
  Args& u(std::string_view k, uint64_t v) { return key(k).append(std::to_string(v)); }
  Args& d(std::string_view k, double v) {
    key(k);
    if (!std::isfinite(v)) return append("null");
    char tmp[40];
    std::snprintf(tmp, sizeof tmp, "%.10g", v);
    return append(tmp);
  }
  /// `v` with at most `decimals` digits after the point (0 to 9), trailing zeros cut.
  Args& fixed(std::string_view k, double v, int decimals) {
    key(k);
    if (!std::isfinite(v)) return append("null");
    char tmp[352];  // the integer digits of any finite double, the point and 9 decimals
    std::string_view t(tmp, std::snprintf(tmp, sizeof tmp, "%.*f", decimals, v));
    if (t.find('.') != std::string_view::npos) {
      while (t.back() == '0') t.remove_suffix(1);
      if (t.back() == '.') t.remove_suffix(1);
    }
    return append(t);
  }
  Args& s(std::string_view k, std::string_view v) {
    key(k);
    s_ += '"';
    append_json_escaped(s_, v);
    s_ += '"';
    return *this;
  }
  Args& dims(std::string_view k, const uint32_t (&v)[3]) {
    return key(k).append("[" + std::to_string(v[0]) + "," + std::to_string(v[1]) + "," + std::to_string(v[2]) + "]");
  }
  Args& attrs(const std::vector<dump::Attr>& attrs) {
    for (const auto& a : attrs) {
      switch (a.type) {
        case AttrType::kInt: i(a.key, a.i); break;
        case AttrType::kBool: key(a.key).append(a.i ? "true" : "false"); break;
        case AttrType::kDouble: d(a.key, a.d); break;
        case AttrType::kString: s(a.key, a.s); break;
        default: key(a.key).append("null"); break;
      }
    }
    return *this;
  }
  bool empty() const { return s_.empty(); }
  std::string json() const { return "{" + s_ + "}"; }

 private:
  Args& key(std::string_view k) {
    if (!s_.empty()) s_ += ',';
    s_ += '"';
    append_json_escaped(s_, k);
    s_ += "\":";
    return *this;
  }
  Args& append(std::string_view v) {
    s_ += v;
    return *this;
  }
  std::string s_;
};

}  // namespace inferscope::exporter::perfetto
