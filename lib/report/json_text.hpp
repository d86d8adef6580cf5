// The JSON reports' text form, shared by the analysis report (json.cpp) and the comparison (diff_json.cpp):
// two-space indentation, keys in insertion order, doubles in their shortest exact form with a fraction.
#pragma once

#include <boost/json/value.hpp>

#include <string>

namespace inferscope::report {

/// `v` pretty-printed, deterministic byte for byte, ending with a newline.
std::string pretty_json(const boost::json::value& v);

}  // namespace inferscope::report
