// Short kernel names for the places a person reads them. A demangled CUDA kernel name can run to thousands of
// characters of template arguments (a PyTorch elementwise kernel names its functor, its lambda and the lambda's
// enclosing function twice); a table or a timeline label needs the name a person would say. The full name stays
// in the JSON report (`name`, with `short_name` beside it) and in the HTML report's hover text.
//
//   short_kernel_name("void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<c10::Half>, "
//                     "at::detail::Array<char*, 3>>(int, at::native::AddFunctor<c10::Half>, ...)")
//     == "vectorized_elementwise_kernel<4, AddFunctor<…>, Array<…>>"
//
//   KernelNames names(full_names_in_report_order);   // or report_kernel_names(analysis)
//   names.short_of(full)   // unique within the report: "gemm<…> #1", "gemm<…> #2" when two shorten alike
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace inferscope::text {

/// Characters a short kernel name aims to stay within (a disambiguator may add a few).
inline constexpr size_t kShortNameChars = 80;

/// The function's base name, like Nsight Systems' `:base` rename, but keeping a shortened template argument
/// list because for many kernels (cutlass::Kernel2<…>, elementwise_kernel<…>) the arguments are what tells them
/// apart: the return type, the parameter list and namespaces are dropped, each template argument loses its
/// namespaces and its own argument list becomes `<…>`, and arguments that do not fit in `max_chars` become `…`.
/// Names that are not demangled C++ (C kernels, Triton, mangled `_Z…`) are only cut to `max_chars`. Always valid
/// UTF-8 on one line; never longer than `max_chars` code points.
std::string short_kernel_name(std::string_view full, size_t max_chars = kShortNameChars);

/// The short names of one report's kernels, unique within it: when several full names shorten to the same text,
/// each gets " #1", " #2", ... in the order the names were given (the report's order, busiest kernel first).
class KernelNames {
 public:
  KernelNames() = default;
  /// `full_names` in report order; repeats are ignored.
  explicit KernelNames(const std::vector<std::string>& full_names);

  /// The unique short name of a known kernel; short_kernel_name(full) for any other name.
  std::string short_of(std::string_view full) const;

  /// Text with every known kernel's full name cut out: pieces of plain text and of names, in order, so that a
  /// writer can escape the text and format the names (a Markdown code span, an HTML element with the full name
  /// on hover). Only names whose short form differs are cut out; the longest name wins where several match.
  struct Piece {
    std::string text;  ///< plain text, or the short name
    std::string full;  ///< the full name, empty for plain text
  };
  std::vector<Piece> split(std::string_view text) const;

 private:
  std::map<std::string, std::string, std::less<>> short_;  // full -> unique short
  std::vector<std::string> replaceable_;                   // full names that shorten, longest first
};

/// The short names of one analysis's kernels, as every writer of it names them (the Markdown, HTML and JSON reports,
/// the SQLite export): its kernel table's names first (busiest first), then the kernels its representative step's
/// timeline draws, so that every kernel a person reads has one short name, unique within the report. `Analysis` is
/// analyze::Analysis; a template so that this library stays below the analyzer it names the kernels of.
template <class Analysis>
KernelNames report_kernel_names(const Analysis& a) {
  std::vector<std::string> names;
  for (const auto& k : a.kernels) names.push_back(k.name);
  for (const auto& l : a.representative.lanes)
    for (const auto& s : l.spans)
      if (s.category == "kernel" && s.label.rfind("merged ", 0) != 0) names.push_back(s.label);  // not "merged N ..."
  return KernelNames(names);
}

}  // namespace inferscope::text
