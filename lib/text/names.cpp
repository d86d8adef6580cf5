#include "text/names.hpp"

#include "text/escape.hpp"

#include <algorithm>
#include <cstring>
#include <set>

namespace inferscope::text {
namespace {

constexpr std::string_view kEllipsis = "\xE2\x80\xA6";  // U+2026
constexpr std::string_view kAnonymous = "(anonymous namespace)";

bool ident_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '$';
}

/// Code points of valid UTF-8.
size_t chars(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

/// The end of an operator's symbol when s[i] starts the keyword `operator` (`operator()`, `operator<<`,
/// `operator->`), so that its brackets are not taken for a parameter or template list; i otherwise.
size_t skip_operator(std::string_view s, size_t i) {
  if (s.compare(i, 8, "operator") != 0 || (i > 0 && ident_char(s[i - 1]))) return i;
  size_t j = i + 8;
  if (j < s.size() && ident_char(s[j])) return i;  // an identifier such as operator_kernel
  while (j < s.size() && s[j] == ' ') ++j;
  if (s.compare(j, 2, "()") == 0 || s.compare(j, 2, "[]") == 0) return j + 2;
  size_t k = j;
  while (k < s.size() && std::strchr("<>=!+-*/%^&|~,", s[k]) != nullptr && s[k] != '\0') ++k;
  if (k > j && k + 1 < s.size() && s[k] == ' ' && s[k + 1] == '<') ++k;  // "operator< <float>": not a separator
  return k;  // a conversion operator or new/delete continues as an identifier
}

/// Calls f(i, plain) for each index at bracket depth 0 (an opening bracket is at the depth outside it); `plain`
/// is false for the characters of an operator's symbol. f returns false to stop early. Returns false when the
/// brackets ( < [ { do not balance, as in a name cut short by the tracer.
template <class F>
bool for_each_top(std::string_view s, F&& f) {
  int depth = 0;
  for (size_t i = 0; i < s.size();) {
    if (const size_t j = skip_operator(s, i); j != i) {
      if (depth == 0)
        for (size_t k = i; k < j; ++k)
          if (!f(k, k < i + 8)) return true;  // the keyword itself is plain text, its symbol is not
      i = j;
      continue;
    }
    const char c = s[i];
    if (depth == 0 && !f(i, true)) return true;
    if (c == '<' || c == '(' || c == '[' || c == '{') ++depth;
    else if (c == '>' || c == ')' || c == ']' || c == '}') {
      if (--depth < 0) return false;
    }
    ++i;
  }
  return depth == 0;
}

/// The pieces of s between top-level occurrences of `sep` ("::" or ",").
std::vector<std::string_view> split_top(std::string_view s, std::string_view sep) {
  std::vector<std::string_view> out;
  size_t from = 0;
  for_each_top(s, [&](size_t i, bool plain) {
    if (plain && i >= from && s.compare(i, sep.size(), sep) == 0) {
      out.push_back(s.substr(from, i - from));
      from = i + sep.size();
    }
    return true;
  });
  out.push_back(s.substr(from));
  return out;
}

/// s with the inside of each top-level <...> and (...) replaced by "…": "Array<char*, 3>" -> "Array<…>".
/// A leading cast such as "(bool)1" is a value and stays.
std::string collapse(std::string_view s) {
  if (!s.empty() && s.front() == '(') return std::string(s);
  std::string out;
  int depth = 0;
  bool cut = false;
  for (size_t i = 0; i < s.size();) {
    if (const size_t j = skip_operator(s, i); j != i) {
      if (depth == 0) out.append(s.substr(i, j - i));
      else cut = true;
      i = j;
      continue;
    }
    const char c = s[i++];
    const bool open = c == '<' || c == '(' || c == '[' || c == '{';
    const bool close = c == '>' || c == ')' || c == ']' || c == '}';
    if (open) {
      if (depth == 0) out += c, cut = false;
      else cut = true;
      ++depth;
    } else if (close) {
      if (depth == 0) {
        out += c;  // unbalanced: kept as text
      } else if (--depth == 0) {
        if (cut) out.append(kEllipsis);
        out += c;
      }
    } else if (depth == 0) {
      out += c;
    } else if (c != ' ') {
      cut = true;
    }
  }
  return out;
}

/// The last name of a qualified name without namespaces: "at::native::AddFunctor<c10::Half> const&" ->
/// "AddFunctor<…> const&". A lambda or unnamed type keeps the name of what encloses it:
/// "gpu_kernel_impl<…>(…)::{lambda(int)#1}".
std::string unqualified(std::string_view s) {
  std::vector<std::string_view> parts;
  for (auto p : split_top(trim(s), "::"))
    if (trim(p) != kAnonymous) parts.push_back(trim(p));
  if (parts.empty()) return std::string(trim(s));
  const std::string_view last = parts.back();
  if (!last.empty() && last.front() == '{' && parts.size() > 1)
    return collapse(parts[parts.size() - 2]) + "::" + std::string(last);
  return collapse(last);
}

}  // namespace

std::string short_kernel_name(std::string_view full, size_t max_chars) {
  std::string s;  // valid UTF-8 on one line, runs of blanks as one space
  for (char c : valid_utf8(full)) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
    if ((static_cast<unsigned char>(c) < 0x20) || c == 0x7f) continue;
    if (c == ' ' && (s.empty() || s.back() == ' ')) continue;
    s += c;
  }
  s = std::string(trim(s));
  if (s.rfind("_Z", 0) == 0 || s.find_first_of("<(:") == std::string::npos) return truncate(s, max_chars);

  // The qualified name: before the parameter list, after the return type.
  size_t start = 0, end = s.size();
  const bool balanced = for_each_top(s, [&](size_t i, bool plain) {
    if (!plain) return true;
    if (s[i] == '(') {
      if (std::string_view(s).substr(i, kAnonymous.size()) == kAnonymous) return true;
      end = i;
      return false;
    }
    if (s[i] == ' ') start = i + 1;
    return true;
  });
  if (!balanced || start >= end) return truncate(s, max_chars);
  const std::string_view qname = trim(std::string_view(s).substr(start, end - start));

  std::vector<std::string_view> parts;
  for (auto p : split_top(qname, "::"))
    if (trim(p) != kAnonymous) parts.push_back(trim(p));
  if (parts.empty()) return truncate(s, max_chars);
  std::string_view base = parts.back();
  std::string prefix;
  if (!base.empty() && base.front() == '{' && parts.size() > 1) prefix = collapse(parts[parts.size() - 2]) + "::";

  // Template arguments, each without namespaces and its own arguments.
  size_t lt = std::string_view::npos;
  for_each_top(base, [&](size_t i, bool plain) {
    if (plain && base[i] == '<') {
      lt = i;
      return false;
    }
    return true;
  });
  if (lt == std::string_view::npos || base.back() != '>') return truncate(prefix + collapse(base), max_chars);
  std::string ident = prefix + std::string(trim(base.substr(0, lt)));
  if (!ident.empty() && ident.back() == '<') ident += ' ';  // "operator< <float>"
  std::vector<std::string> args;
  for (auto a : split_top(base.substr(lt + 1, base.size() - lt - 2), ","))
    if (!trim(a).empty()) args.push_back(unqualified(a));

  // As many arguments as fit, the rest as "…".
  auto with = [&](size_t n) {
    std::string out = ident + "<";
    for (size_t k = 0; k < n; ++k) out += (k ? ", " : "") + args[k];
    if (n < args.size()) out += std::string(n ? ", " : "") + std::string(kEllipsis);
    return out + ">";
  };
  for (size_t n = args.size() + 1; n-- > 0;) {
    std::string out = with(n);
    if (chars(out) <= max_chars) return out;
  }
  return truncate(ident + "<" + std::string(kEllipsis) + ">", max_chars);
}

KernelNames::KernelNames(const std::vector<std::string>& full_names) {
  std::vector<const std::string*> order;
  std::map<std::string, size_t> uses;  // short name -> kernels that shorten to it
  for (const auto& f : full_names) {
    auto [it, added] = short_.emplace(f, std::string());
    if (!added) continue;
    it->second = short_kernel_name(f);
    ++uses[it->second];
    order.push_back(&it->first);
  }
  std::set<std::string> taken;
  for (const auto& [s, n] : uses)
    if (n == 1) taken.insert(s);
  std::map<std::string, int> next;
  for (const std::string* f : order) {
    std::string& s = short_.at(*f);
    if (uses[s] < 2) continue;
    int& k = next[s];
    std::string candidate;
    do candidate = s + " #" + std::to_string(++k);
    while (taken.count(candidate) != 0);
    taken.insert(candidate);
    s = candidate;
  }
  for (const auto& [f, s] : short_)
    if (!f.empty() && f != s) replaceable_.push_back(f);
  std::stable_sort(replaceable_.begin(), replaceable_.end(),
                   [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
}

std::string KernelNames::short_of(std::string_view full) const {
  if (auto it = short_.find(full); it != short_.end()) return it->second;
  return short_kernel_name(full);
}

std::vector<KernelNames::Piece> KernelNames::split(std::string_view text) const {
  std::vector<Piece> out;
  size_t from = 0;
  while (from < text.size()) {
    size_t best = std::string_view::npos;
    const std::string* name = nullptr;
    for (const auto& f : replaceable_) {  // longest first: at equal positions the longer name wins
      const size_t p = text.find(f, from);
      if (p < best) best = p, name = &f;
    }
    if (name == nullptr) break;
    if (best > from) out.push_back({std::string(text.substr(from, best - from)), {}});
    out.push_back({short_.at(*name), *name});
    from = best + name->size();
  }
  if (from < text.size()) out.push_back({std::string(text.substr(from)), {}});
  return out;
}

}  // namespace inferscope::text
