// The live server module (lib/live/server.cpp), loaded as the runtime loads it (dlopen): starting and stopping it.
#include "live/server.hpp"

#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

using namespace inferscope::live;

namespace {

const ModuleApi* load_module() {
  void* h = ::dlopen(ISCOPE_LIVE_MODULE, RTLD_NOW | RTLD_LOCAL);
  if (!h) return nullptr;
  auto entry = reinterpret_cast<const ModuleApi* (*)()>(::dlsym(h, "inferscope_live_module"));
  return entry ? entry() : nullptr;
}

int port_of(const std::string& url) {  // http://127.0.0.1:PORT/?token=...
  const size_t colon = url.rfind(':'), slash = url.find('/', colon);
  return std::stoi(url.substr(colon + 1, slash - colon - 1));
}

bool can_bind(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  ::close(fd);
  return ok;
}

}  // namespace

// httplib's stop() did nothing before the server's thread reached its listening loop, so a session that stopped
// right after it started (`iscope-run --live 0 -- /bin/true`) waited the whole bound, printed "the server did not
// stop within 1 s (a client held it); left behind", and the port stayed taken while the process lived.
TEST_CASE("a server stopped right after it started stops, and its port is free again") {
  const ModuleApi* api = load_module();
  REQUIRE_MESSAGE(api, "cannot load " ISCOPE_LIVE_MODULE ": ", ::dlerror());
  for (int i = 0; i < 5; ++i) {
    CAPTURE(i);
    std::string error;
    Server* s = api->start(Listen{"127.0.0.1", 0}, "t", [] { return Snapshot{}; }, error);
    REQUIRE_MESSAGE(s, error);
    const int port = port_of(api->url(s));
    CHECK(api->stop(s, 5000));  // its threads ended: not left behind
    CHECK(can_bind(port));
  }
}
