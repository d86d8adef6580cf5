// Order statistics over step durations and periods, one definition for the analyzer and the comparison of two
// runs (report/diff.cpp), so that a median or a percentile means the same in both.
#pragma once

#include <vector>

namespace inferscope::analyze {

/// The median (the mean of the two middle values for an even count), reordering `v`; 0 for none.
double median_in_place(std::vector<double>& v);

/// Nearest rank: the value at rank ceil(q·n) of a sorted list (the first for q = 0); 0 for none.
double percentile_sorted(const std::vector<double>& sorted, double q);

}  // namespace inferscope::analyze
