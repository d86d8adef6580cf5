// Where the live server listens, and its token: pure, so the runtime and the unit tests use them without the
// server module.
#include "live/server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/random.h>

namespace inferscope::live {

std::string url_host(const std::string& host) { return host.find(':') != std::string::npos ? "[" + host + "]" : host; }

// An address, never a name that merely looks like one: `127.example.org` is a host name, which may resolve to any
// address (it used to pass for loopback because it starts with "127.").
bool is_loopback(const std::string& host) {
  if (host == "localhost") return true;
  in_addr v4{};
  if (::inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  return ::inet_pton(AF_INET6, host.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

std::string parse_listen(const std::string& spec, bool any_address, Listen& out) {
  const size_t colon = spec.rfind(':');
  std::string host = colon == std::string::npos ? "127.0.0.1" : spec.substr(0, colon);
  const std::string port = colon == std::string::npos ? spec : spec.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  else if (host.find(':') != std::string::npos)  // `::1` alone split at its last ':' was host ':', port 1
    return "live: '" + spec + "': an IPv6 address is written in brackets, [ADDR]:PORT ([::1]:8080)";
  if (host.empty() || port.empty() || port.find_first_not_of("0123456789") != std::string::npos || port.size() > 5 ||
      std::stoi(port) > 65535)
    return "live: '" + spec + "' is not PORT or ADDR:PORT";
  if (!is_loopback(host) && !any_address)
    return "live: refusing to serve on " + host + ", which is not loopback: anyone who reaches it could read the "
           "page and /metrics; set live_any_address (iscope-run --live-any-address) to allow it";
  out.host = host;
  out.port = std::stoi(port);
  return "";
}

std::string random_token() {
  unsigned char b[16] = {};
  size_t got = 0;
  while (got < sizeof(b)) {
    const ssize_t n = ::getrandom(b + got, sizeof(b) - got, 0);
    if (n <= 0) break;
    got += size_t(n);
  }
  static const char* hex = "0123456789abcdef";
  std::string t;
  for (unsigned char c : b) t += hex[c >> 4], t += hex[c & 15];
  return t;
}

}  // namespace inferscope::live
