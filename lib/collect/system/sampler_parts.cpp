#include "collect/system/sampler_parts.hpp"

#include <array>
#include <charconv>
#include <utility>

namespace inferscope::sys {
namespace {

constexpr std::array<std::pair<std::string_view, SamplerPart>, 5> kNames{{
    {"rounds", kPartRounds},
    {"nvml", kPartNvml},
    {"ticks", kPartTicks},
    {"blocked_in", kPartBlockedIn},
    {"exact_clock", kPartExactClock},
}};

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

}  // namespace

std::optional<SamplerParts> parse_sampler_parts(std::string_view spec, std::string* error) {
  auto fail = [&](std::string why) -> std::optional<SamplerParts> {
    if (error) *error = "system sampler parts '" + std::string(spec) + "': " + std::move(why);
    return std::nullopt;
  };
  SamplerParts p{0, 0};
  if (trimmed(spec).empty()) return fail("empty (name parts, or 'all' or 'none')");
  std::string_view rest = spec;
  while (true) {
    const size_t comma = rest.find(',');
    const std::string_view item = trimmed(rest.substr(0, comma));
    if (item == "all") {
      p.mask |= kAllSamplerParts;
    } else if (item == "none") {
      // nothing to add: "none" alone switches every part off
    } else if (item.substr(0, 8) == "tick_us=") {
      const std::string_view num = item.substr(8);
      uint32_t us = 0;
      const auto [end, ec] = std::from_chars(num.data(), num.data() + num.size(), us);
      if (ec != std::errc() || end != num.data() + num.size() || us == 0 || us > 1'000'000)
        return fail("tick_us wants a whole number of microseconds from 1 to 1000000, not '" + std::string(num) + "'");
      p.tick_us = us;
    } else {
      bool known = false;
      for (const auto& [name, part] : kNames)
        if (item == name) {
          p.mask |= part;
          known = true;
        }
      if (!known)
        return fail(item.empty() ? std::string("an empty name")
                                 : "unknown part '" + std::string(item) +
                                       "' (rounds, nvml, ticks, blocked_in, exact_clock, all, none, tick_us=N)");
    }
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return p;
}

std::string sampler_parts_text(uint32_t mask) {
  std::string out;
  for (const auto& [name, part] : kNames)
    if (mask & part) out += (out.empty() ? "" : ",") + std::string(name);
  return out.empty() ? "none" : out;
}

}  // namespace inferscope::sys
