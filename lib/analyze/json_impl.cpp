// Boost.JSON is used header-only: its implementation is compiled here, in exactly one translation unit of
// the project. Every other file (this library's and lib/report's) includes <boost/json.hpp> only and links
// inferscope_analyze, which provides these symbols.
#include <boost/json/src.hpp>
