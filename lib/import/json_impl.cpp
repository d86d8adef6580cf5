// Boost.JSON is used header-only: its implementation is compiled here, in exactly one translation unit of
// the project, in the lowest library that parses JSON. Every other file (the analyzer's, lib/report's, lib/export's)
// includes <boost/json.hpp> only and links inferscope_import (directly or through inferscope_analyze), which
// provides these symbols.
#include <boost/json/src.hpp>
