// The seeds' JSON event list (`{"events": [...]}` or a bare array of events with event_type, name, start_us,
// end_us) as the dump's records (json_events.cpp names every field).
#pragma once

#include "import/warnings.hpp"

#include <string>
#include <vector>

namespace boost::json {
class value;
}  // namespace boost::json

namespace inferscope::dump {
class DumpBuilder;
}  // namespace inferscope::dump

namespace inferscope::import {

/// Adds the events of `root` (the parsed document of the file at `path`) to `b`: threads, ranges, syncs, marks and
/// GPU work, times shifted to start at zero. Unknown event types are skipped and counted in `warnings`. Throws
/// InputError naming `path`, the event index and the field.
void json_events_to_records(const std::string& path, const boost::json::value& root, dump::DumpBuilder& b,
                            std::vector<ImportWarning>& warnings);

}  // namespace inferscope::import
