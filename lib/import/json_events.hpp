// The seeds' JSON event list (`{"events": [...]}` or a bare array of events with event_type, name, start_us,
// end_us) as the dump's records (json_events.cpp names every field), read event by event as the document streams.
#pragma once

#include "import/warnings.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace boost::json {
class value;
}  // namespace boost::json

namespace inferscope::dump {
class DumpBuilder;
}  // namespace inferscope::dump

namespace inferscope::import {

/// The seeds' events read one by one as the document streams (json_stream.hpp), then added to a dump builder:
/// threads, ranges, syncs, marks and GPU work, times shifted to start at zero. Unknown event types are skipped and
/// counted in the warnings.
class JsonEventsReader {
 public:
  explicit JsonEventsReader(const std::string& path);
  ~JsonEventsReader();
  /// One event. Throws InputError naming the file, the event index and the field.
  void event(const boost::json::value& e, uint64_t index);
  void finish(dump::DumpBuilder& b, std::vector<ImportWarning>& warnings);

 private:
  struct State;
  std::string path_;
  std::unique_ptr<State> s_;
};

}  // namespace inferscope::import
