// Boost.JSON is used header-only: its implementation is compiled in exactly one translation unit of the
// program. This is that unit for inferscope_report until the merge with inferscope_analyze, which needs one
// too (keep exactly one of the two when both libraries link into the same program).
#include <boost/json/src.hpp>
