#include "import/json_stream.hpp"

#include "import/import.hpp"
#include "import/trace_text.hpp"

#include <boost/json/basic_parser_impl.hpp>
#include <boost/json/value_stack.hpp>

#include <exception>

namespace inferscope::import {
namespace json = boost::json;

namespace {

// Where the parser is in the text, counted as the text passes (the text is never held whole).
struct Position {
  uint64_t offset = 0, line = 1, column = 1;
  void advance(std::string_view passed) {
    for (char c : passed) {
      if (c == '\n') line += 1, column = 1;
      else ++column;
    }
    offset += passed.size();
  }
  std::string where() const {
    return "line " + std::to_string(line) + ", column " + std::to_string(column) + " (offset " + std::to_string(offset) + ")";
  }
};

bool is_events_key(const std::string& key) { return key == "traceEvents" || key == "events"; }

// Basic_parser's handler: tracks where it is in the document (the top-level object, its event array, an event, a
// member), builds events and members with a value_stack (what json::parser does for a whole document), and hands
// each event over as soon as it is whole. A callback that fails keeps its exception for stream_json_trace to
// rethrow once the parser has returned (the parser is not written for exceptions thrown through it).
class StreamHandler {
 public:
  static constexpr std::size_t max_object_size = std::size_t(-1);
  static constexpr std::size_t max_array_size = std::size_t(-1);
  static constexpr std::size_t max_key_size = std::size_t(-1);
  static constexpr std::size_t max_string_size = std::size_t(-1);

  StreamHandler(const std::string& path, EventSink& sink, StreamedDocument& doc) : path_(path), sink_(sink), doc_(doc) {}

  bool on_document_begin(json::error_code&) { return true; }
  bool on_document_end(json::error_code&) { return true; }
  bool on_object_begin(json::error_code& ec) { return guarded(ec, [&] { open(true); }); }
  bool on_object_end(std::size_t n, json::error_code& ec) { return guarded(ec, [&] { close([&] { st_.push_object(n); }); }); }
  bool on_array_begin(json::error_code& ec) { return guarded(ec, [&] { open(false); }); }
  bool on_array_end(std::size_t n, json::error_code& ec) { return guarded(ec, [&] { close([&] { st_.push_array(n); }); }); }
  bool on_key_part(json::string_view s, std::size_t, json::error_code& ec) { return guarded(ec, [&] { key(s, false); }); }
  bool on_key(json::string_view s, std::size_t, json::error_code& ec) { return guarded(ec, [&] { key(s, true); }); }
  bool on_string_part(json::string_view s, std::size_t, json::error_code& ec) {
    return guarded(ec, [&] { scalar(s.size(), false, [&] { st_.push_chars(s); }); });
  }
  bool on_string(json::string_view s, std::size_t, json::error_code& ec) {
    return guarded(ec, [&] { scalar(s.size(), true, [&] { st_.push_string(s); }); });
  }
  bool on_number_part(json::string_view, json::error_code&) { return true; }
  bool on_int64(int64_t i, json::string_view, json::error_code& ec) {
    return guarded(ec, [&] { scalar(16, true, [&] { st_.push_int64(i); }); });
  }
  bool on_uint64(uint64_t u, json::string_view, json::error_code& ec) {
    return guarded(ec, [&] { scalar(16, true, [&] { st_.push_uint64(u); }); });
  }
  bool on_double(double d, json::string_view, json::error_code& ec) {
    return guarded(ec, [&] { scalar(16, true, [&] { st_.push_double(d); }); });
  }
  bool on_bool(bool b, json::error_code& ec) { return guarded(ec, [&] { scalar(16, true, [&] { st_.push_bool(b); }); }); }
  bool on_null(json::error_code& ec) { return guarded(ec, [&] { scalar(16, true, [&] { st_.push_null(); }); }); }
  bool on_comment_part(json::string_view, json::error_code&) { return true; }
  bool on_comment(json::string_view, json::error_code&) { return true; }

  void rethrow_failure() const {
    if (failure_) std::rethrow_exception(failure_);
  }

 private:
  enum class Target { kMember, kEvent };

  template <class F>
  bool guarded(json::error_code& ec, F&& f) {
    try {
      f();
      return true;
    } catch (...) {
      failure_ = std::current_exception();
      ec = json::error::exception;
      return false;
    }
  }

  // A value begins where the document's structure is (not inside a value being built): the root, a member of the
  // top-level object, an element of the event array.
  void start_build() {
    building_ = true;
    build_base_ = depth_;
    target_ = events_level_ && depth_ == events_level_ ? Target::kEvent : Target::kMember;
    bytes_ = 0;
    st_.reset();
  }

  void open(bool object) {
    if (building_) {
      ++depth_;
      return count(16);
    }
    if (depth_ == 0) {
      ++depth_;
      if (object) doc_.root_is_object = true;
      else begin_events("");  // the seeds' bare array of events
      return;
    }
    if (depth_ == 1 && doc_.root_is_object && !object && !doc_.has_events && is_events_key(key_)) {
      ++depth_;
      return begin_events(key_);
    }
    start_build();
    ++depth_;
    count(16);
  }

  template <class Push>
  void close(Push&& push) {
    if (building_) {
      push();
      if (--depth_ == build_base_) finish();
      return;
    }
    if (events_level_ && depth_ == events_level_) events_level_ = 0;  // the event array ended
    --depth_;
  }

  void key(json::string_view s, bool done) {
    if (building_) {
      count(s.size());
      if (done) st_.push_key(s);
      else st_.push_chars(s);
      return;
    }
    if (key_done_) key_.clear();
    key_done_ = done;
    if (key_.size() + s.size() > 4096) throw InputError(path_ + ": a top-level key longer than 4 KiB: not a trace");
    key_.append(s.data(), s.size());
  }

  template <class Push>
  void scalar(size_t bytes, bool complete, Push&& push) {
    if (!building_) {
      if (depth_ == 0) throw InputError(path_ + ": the JSON document is neither an object with \"events\" nor an array");
      start_build();
    }
    count(bytes);
    push();
    if (complete && depth_ == build_base_) finish();
  }

  void begin_events(const std::string& key) {
    events_level_ = depth_;
    events_key_ = key;
    doc_.has_events = true;
    sink_.begin_events(key, doc_.members);
  }

  std::string event_name() const {
    return events_key_.empty() || events_key_ == "events" ? "event " + std::to_string(index_)
                                                          : events_key_ + "[" + std::to_string(index_) + "]";
  }

  void count(size_t bytes) {
    bytes_ += bytes;
    if (target_ == Target::kEvent && bytes_ > kMaxEventBytes)
      throw InputError(path_ + ": " + event_name() + ": larger than " + std::to_string(kMaxEventBytes >> 20) +
                       " MiB; no event of a trace is that large (a hostile or damaged file)");
    if (target_ == Target::kMember && members_bytes_ + bytes_ > kMaxMemberBytes)
      throw InputError(path_ + ": the top-level members beside the event array (at '" + key_ + "') hold more than " +
                       std::to_string(kMaxMemberBytes >> 20) + " MiB; a trace's are small (a hostile or damaged file)");
  }

  void finish() {
    building_ = false;
    json::value v = st_.release();
    if (target_ == Target::kEvent) {
      sink_.event(v, index_);
      doc_.events = ++index_;
    } else {
      members_bytes_ += bytes_;
      doc_.members.insert_or_assign(key_, std::move(v));
    }
  }

  const std::string& path_;
  EventSink& sink_;
  StreamedDocument& doc_;
  json::value_stack st_;
  int depth_ = 0;          // containers open
  int events_level_ = 0;   // the depth of the event array's elements while inside it, else 0
  bool building_ = false;  // a value (an event, a member) is being built on st_
  int build_base_ = 0;     // the depth its building started at
  Target target_ = Target::kMember;
  uint64_t bytes_ = 0, members_bytes_ = 0, index_ = 0;
  std::string key_, events_key_;  // the current top-level key; the event array's
  bool key_done_ = false;
  std::exception_ptr failure_;
};

[[noreturn]] void syntax_error(const std::string& path, const Position& at, const json::error_code& ec, bool gzipped,
                               bool at_end) {
  throw InputError(path + ": JSON syntax error at " + at.where() + (gzipped ? " of the gunzipped text" : "") + ": " +
                   ec.message() + (at_end ? " (the text ends there: is the file cut short?)" : ""));
}

bool blank(std::string_view s) { return s.find_first_not_of(" \t\r\n") == std::string_view::npos; }

}  // namespace

StreamedDocument stream_json_trace(const std::string& path, EventSink& sink) {
  StreamedDocument doc;
  TraceTextSource src(path);
  json::basic_parser<StreamHandler> p(json::parse_options{}, path, sink, doc);
  Position at;
  std::string_view piece;
  json::error_code ec;
  while (src.next(piece)) {
    if (p.done()) {  // the document ended in an earlier piece: only blanks may follow
      if (!blank(piece)) syntax_error(path, at, json::error::extra_data, src.gzipped(), false);
      continue;
    }
    const size_t used = p.write_some(true, piece.data(), piece.size(), ec);
    at.advance(piece.substr(0, used));
    if (ec) {
      p.handler().rethrow_failure();
      syntax_error(path, at, ec, src.gzipped(), false);
    }
    if (used < piece.size() && !blank(piece.substr(used))) syntax_error(path, at, json::error::extra_data, src.gzipped(), false);
  }
  if (!p.done()) {
    p.write_some(false, nullptr, 0, ec);
    if (ec) {
      p.handler().rethrow_failure();
      syntax_error(path, at, ec, src.gzipped(), true);
    }
  }
  doc.gzipped = src.gzipped();
  return doc;
}

}  // namespace inferscope::import
