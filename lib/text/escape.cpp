#include "text/escape.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

namespace inferscope::text {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

/// Length of the well-formed UTF-8 sequence at s[i], or 0 when the byte there starts none (RFC 3629:
/// no overlong forms, no surrogates, nothing above U+10FFFF).
size_t utf8_sequence_length(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const uint8_t c = b(i);
  if (c < 0x80) return 1;
  size_t n;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) n = 2;
  else if (c == 0xE0) n = 3, lo = 0xA0;
  else if (c >= 0xE1 && c <= 0xEC) n = 3;
  else if (c == 0xED) n = 3, hi = 0x9F;
  else if (c >= 0xEE && c <= 0xEF) n = 3;
  else if (c == 0xF0) n = 4, lo = 0x90;
  else if (c >= 0xF1 && c <= 0xF3) n = 4;
  else if (c == 0xF4) n = 4, hi = 0x8F;
  else return 0;
  if (i + n > s.size()) return 0;
  if (b(i + 1) < lo || b(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k)
    if (b(i + k) < 0x80 || b(i + k) > 0xBF) return 0;
  return n;
}

/// Calls f(sequence) for each well-formed sequence of s, and f(U+FFFD) for each stray byte.
template <class F>
void for_each_char(std::string_view s, F&& f) {
  for (size_t i = 0; i < s.size();) {
    size_t n = utf8_sequence_length(s, i);
    if (n == 0) {
      f(kReplacement);
      i += 1;
    } else {
      f(s.substr(i, n));
      i += n;
    }
  }
}

/// The C1 control characters, U+0080..U+009F (UTF-8 C2 80..C2 9F): U+009B is a terminal's CSI as ESC [ is.
bool is_c1_control(std::string_view ch) {
  return ch.size() == 2 && static_cast<uint8_t>(ch[0]) == 0xC2 && static_cast<uint8_t>(ch[1]) <= 0x9F;
}

/// for_each_char for the escapers: multi-byte sequences (and U+FFFD for stray bytes) go to `out` as they are,
/// C1 control characters excepted (dropped); each ASCII character goes to f(char), which decides what `out` gets.
template <class F>
void for_each_ascii(std::string_view s, std::string& out, F&& f) {
  for_each_char(s, [&](std::string_view ch) {
    if (ch.size() > 1) {
      if (!is_c1_control(ch)) out.append(ch);
    } else {
      f(ch[0]);
    }
  });
}

}  // namespace

std::string valid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for_each_char(s, [&](std::string_view c) { out.append(c); });
  return out;
}

void append_json_escaped(std::string& out, std::string_view s) {
  // Runs of plain ASCII (the common case: kernel and function names) are appended in one piece.
  size_t i = 0;
  while (i < s.size()) {
    size_t j = i;
    while (j < s.size()) {
      const auto c = static_cast<uint8_t>(s[j]);
      if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') break;
      ++j;
    }
    out.append(s.data() + i, j - i);
    if (j == s.size()) break;
    const auto c = static_cast<uint8_t>(s[j]);
    if (c >= 0x80) {
      const size_t n = utf8_sequence_length(s, j);
      if (n == 0) {
        out.append(kReplacement);
        i = j + 1;
      } else {
        out.append(s.data() + j, n);
        i = j + n;
      }
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default: {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
        out += buf;
      }
    }
    i = j + 1;
  }
}

std::string json_quote(std::string_view s) {
  std::string out = "\"";
  append_json_escaped(out, s);
  out += '"';
  return out;
}

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  for_each_ascii(s, out, [&](char c) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default:
        // Control characters are not allowed in HTML text; tab and newline are harmless.
        if ((static_cast<uint8_t>(c) < 0x20 && c != '\t' && c != '\n') || c == 0x7f) break;
        out += c;
    }
  });
  return out;
}

std::string md_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  const auto word = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (static_cast<uint8_t>(c) & 0x80) != 0;
  };
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    switch (c) {
      case '\\': case '`': case '*': case '[': case ']': case '<': case '>': case '|': case '~':
        out += '\\';
        out += c;
        break;
      case '_':
        // An underscore inside a word never starts emphasis (CommonMark), so snake_case stays as typed.
        if (i == 0 || i + 1 == s.size() || !word(s[i - 1]) || !word(s[i + 1])) out += '\\';
        out += c;
        break;
      case '#':
        // Only a line's first character can open a heading.
        if (out.empty()) out += '\\';
        out += c;
        break;
      case '\n': case '\r': case '\t': out += ' '; break;
      default:
        if (static_cast<uint8_t>(c) < 0x20 || c == 0x7f) break;
        out += c;
    }
  }
  return valid_utf8(out);
}

namespace {

/// Characters of a program name as prose quotes it: identifiers, scopes and template brackets.
/// (A space only ever comes inside angle brackets: name_end joins words only there.)
bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
         c == ':' || c == '<' || c == '>' || c == ',' || c == '*' || c == '&' || c == ' ';
}

bool letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

/// Where the word starting at `i` ends: at the next space, unless the word opens an angle bracket right before
/// a letter (`map<int,`, `'<code`) and a later word closes it (`float>`, `12>'`): then the words up to that one
/// are one name with spaces inside (`std::map<int, float>`, `<code 12>`). At most 8 words are joined.
size_t name_end(std::string_view s, size_t i) {
  size_t end = std::min(s.find(' ', i), s.size());
  int depth = 0;
  bool opens = false;
  for (size_t k = i; k < end; ++k) {
    if (s[k] == '<') {
      ++depth;
      opens |= k + 1 < end && letter(s[k + 1]);
    } else if (s[k] == '>') {
      --depth;
    }
  }
  if (depth <= 0 || !opens) return end;
  size_t j = end;
  for (int words = 1; words < 8 && j < s.size() && depth > 0; ++words) {
    const size_t next = std::min(s.find(' ', j + 1), s.size());
    for (size_t k = j + 1; k < next; ++k) depth += s[k] == '<' ? 1 : s[k] == '>' ? -1 : 0;
    j = next;
  }
  return depth == 0 ? j : end;
}

/// `word` as a name for a code span: its core without surrounding punctuation and quotes, and what is left on
/// either side. Empty core when the word is not a name that escaping would mangle.
struct NameInWord {
  std::string_view before, core, after;
};

NameInWord name_in_word(std::string_view word) {
  constexpr std::string_view kOpen = "(\"'", kClose = ")\"',;:.";
  constexpr std::string_view kEllipsis = "\xE2\x80\xA6";  // a name cut short by truncate()
  size_t b = 0, e = word.size();
  while (b < e && kOpen.find(word[b]) != std::string_view::npos) ++b;
  if (word.ends_with(kEllipsis)) e -= kEllipsis.size();
  while (e > b && kClose.find(word[e - 1]) != std::string_view::npos) --e;
  const std::string_view core = word.substr(b, e - b);
  bool has_letter = false, bracket = false;
  for (char c : core) {
    if (!name_char(c)) return {word, {}, {}};
    has_letter |= letter(c);
    bracket |= c == '<' || c == '>';
  }
  if (!has_letter || !bracket || core.front() == ' ' || core.back() == ' ') return {word, {}, {}};
  std::string_view before = word.substr(0, b), after = word.substr(e);
  // A quoted name: the span is the quote.
  if (!before.empty() && !after.empty() && (before.back() == '\'' || before.back() == '"') && after.front() == before.back()) {
    before.remove_suffix(1);
    after.remove_prefix(1);
  }
  return {before, core, after};
}

}  // namespace

std::string md_prose(std::string_view s) {
  std::string out, plain;  // plain: text not yet escaped (escaped in runs, so md_escape sees word boundaries)
  size_t i = 0;
  for (;;) {
    const size_t end = name_end(s, i);
    const NameInWord w = name_in_word(s.substr(i, end - i));
    plain += w.before;
    if (!w.core.empty()) {
      out += md_escape(plain);
      out += md_code(w.core);
      plain = w.after;
    }
    if (end >= s.size()) break;
    plain += ' ';
    i = end + 1;
  }
  return out + md_escape(plain);
}

std::string md_code(std::string_view s) {
  std::string body;
  for_each_ascii(s, body, [&](char c) {
    if (c == '\n' || c == '\r' || c == '\t') body += ' ';
    else if (static_cast<uint8_t>(c) >= 0x20 && c != 0x7f) body += c;
  });
  if (body.empty()) return "` `";
  // The fence is one backtick longer than the longest run inside (CommonMark code spans).
  size_t longest = 0, run = 0;
  for (char c : body) {
    run = c == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  const std::string fence(longest + 1, '`');
  // One space each side is stripped when both are there: needed when the name starts or ends with a backtick,
  // and to keep a name's own surrounding spaces.
  const bool pad = body.front() == '`' || body.back() == '`' ||
                   (body.front() == ' ' && body.back() == ' ' && body.find_first_not_of(' ') != std::string::npos);
  return fence + (pad ? " " : "") + body + (pad ? " " : "") + fence;
}

std::string one_line(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for_each_ascii(s, out, [&](char c) {
    if (c == '\n' || c == '\r' || c == '\t') out += ' ';
    else if (static_cast<uint8_t>(c) >= 0x20 && c != 0x7f) out += c;
  });
  return out;
}

std::string md_cell(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

std::string truncate(std::string_view s, size_t max_chars) {
  std::vector<std::string_view> chars;
  for_each_char(s, [&](std::string_view c) { chars.push_back(c); });
  std::string out;
  if (chars.size() <= max_chars) {
    for (auto c : chars) out.append(c);
    return out;
  }
  for (size_t i = 0; i + 1 < max_chars; ++i) out.append(chars[i]);
  if (max_chars > 0) out += "\xE2\x80\xA6";  // U+2026
  return out;
}

std::string fmt(double v, int decimals) {
  if (!std::isfinite(v)) return "n/a";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  std::string s = buf;
  if (s == "-0" || s.find_first_not_of("-0.") == std::string::npos) {
    // "-0.00" reads as a sign error in a report
    if (!s.empty() && s[0] == '-') s.erase(0, 1);
  }
  return s;
}

}  // namespace inferscope::text

namespace inferscope::text {

std::string fmt_ms(double ms) {
  const double a = std::fabs(ms);
  return fmt(ms, a >= 10 ? 1 : a >= 0.1 ? 2 : 3);
}

std::string fmt_value(double v) {
  if (std::isfinite(v) && v == std::round(v) && std::fabs(v) < 1e15) return fmt(v, 0);
  std::string s = fmt(v, 3);
  if (s.find('.') != std::string::npos) {
    while (!s.empty() && s.back() == '0') s.pop_back();
    if (!s.empty() && s.back() == '.') s.pop_back();
  }
  return s;
}

}  // namespace inferscope::text
