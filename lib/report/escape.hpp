// The report writers' escaping: lib/text/escape.hpp, shared with iscope-analyze --summary (lib/analyze), named here
// in the writers' namespace as they have always called it.
#pragma once

#include "text/escape.hpp"

namespace inferscope::report {

using text::append_json_escaped;
using text::fmt;
using text::fmt_ms;
using text::fmt_value;
using text::html_escape;
using text::json_quote;
using text::md_cell;
using text::md_code;
using text::md_escape;
using text::md_prose;
using text::truncate;
using text::valid_utf8;

}  // namespace inferscope::report
