// The report linter: properties every report of every analysis must have, checked on the Analysis and on the text of
// each format. A report that breaks one contradicts itself or gives advice its trace does not support; the test
// tests/report/test_lint.cpp runs it over every real dump in tests/fixtures and every format.
//
//   for (const LintProblem& p : lint_report(analysis, markdown, html, json)) std::cerr << p.rule << ": " << p.what;
//
// The properties (each a LintProblem::rule):
//   saving_within_step      no finding's impact and no suggestion's saving exceeds the step it is a part of
//   needs_hold              every fact a suggestion needs holds for the program (Analysis::program)
//   no_advice_at_zero       a cause that costs nothing (impact 0, not informational) has no suggestions
//   counts_add_up           every step found = warm-up + steady; steady = typical + outliers (steps alike), or
//                           typical = steady (not alike: the breakdown describes the mean, outliers included)
//   no_zero_count_claim     no "after 0 steps" beside steps analysed
//   one_unit                one unit per quantity: decimal MB/GB, never MiB/GiB beside them
//   advice_fits_language    no torch/py-spy/DataLoader advice for a native program, no CUDA C++ API advice for Python
//   advice_fits_facts       no DataLoader advice without a DataLoader, no lower-precision advice for matrix work
//                           already on tensor cores (words a suggestion may only use with the fact)
#pragma once

#include "analyze/analysis.hpp"

#include <string>
#include <vector>

namespace inferscope::report {

struct LintProblem {
  std::string rule;  ///< the property, as named above
  std::string what;  ///< the offending finding, suggestion or text
};

/// Every property the analysis and its reports break; empty when they hold. `markdown`, `html` and `json`: the
/// reports written from `a` (any may be empty: only the others are read).
std::vector<LintProblem> lint_report(const analyze::Analysis& a, const std::string& markdown, const std::string& html,
                                     const std::string& json);

}  // namespace inferscope::report
