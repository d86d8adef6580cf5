// A JSON trace read as a stream (docs/reliability.md, "Memory bounds"): the text goes through Boost.JSON's SAX
// parser (basic_parser) a piece at a time as it is read (and inflated); each element of the document's event array
// is built as a small value, handed to the importer and dropped; the document's other members are kept. So the
// import holds what the importer keeps of the events, one event, and the members, never the text or a tree of the
// whole document, which cost 18 to 27 times the text (a 102 KB gzip trace reached 1.73 GB).
#pragma once

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <cstdint>
#include <string>

namespace inferscope::import {

/// One event is at most this much content (strings and keys, 16 bytes per number, container or literal).
inline constexpr uint64_t kMaxEventBytes = uint64_t(4) << 20;
/// The members beside the event array (torch.profiler's deviceProperties, distributedInfo, otherData) together.
inline constexpr uint64_t kMaxMemberBytes = uint64_t(16) << 20;

/// Where a streamed document's events go.
class EventSink {
 public:
  virtual ~EventSink() = default;
  /// The document's event array begins: the first array under "traceEvents" or "events" in the top-level object
  /// (`key`), or the document itself is an array (`key` ""). `members`: the top-level members read before it.
  virtual void begin_events(const std::string& key, const boost::json::object& members) = 0;
  /// One element of the event array, in order (`index` from 0). May throw InputError.
  virtual void event(const boost::json::value& e, uint64_t index) = 0;
};

/// What was seen of a streamed document besides its events.
struct StreamedDocument {
  boost::json::object members;  ///< the top-level members other than the event array, before and after it
  bool root_is_object = false;
  bool has_events = false;      ///< begin_events was called
  uint64_t events = 0;
  bool gzipped = false;
};

/// Streams the JSON text of the file at `path` (gunzipped as it is read when it starts with the gzip magic) into
/// `sink`. Throws InputError naming the file and, for a syntax error, the line, column and offset in the text; an
/// event or the members beyond their bounds above are refused naming the event or the member.
StreamedDocument stream_json_trace(const std::string& path, EventSink& sink);

}  // namespace inferscope::import
