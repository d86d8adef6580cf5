#include "runtime/crash_dump.hpp"

#include "dump/files.hpp"
#include "dump/format.hpp"

#include <inferscope/internal/hot_path.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <vector>

namespace inferscope::runtime::crash {
namespace {

constexpr int kSignals[] = {SIGABRT, SIGSEGV, SIGBUS};
constexpr int kMaxSignal = 65;

std::atomic<Image*> g_image{nullptr};
std::atomic<pid_t> g_owner{0};  // the process whose writer armed the image
// The update protocol (both seq_cst): the writer sets `updating` then reads `crashing`; the handler sets
// `crashing` then reads `updating`. One of them always sees the other.
std::atomic<bool> g_crashing{false};
std::atomic<bool> g_updating{false};
std::atomic<long> g_updater_tid{0};
std::atomic<int> g_dump_state{0};  // 0: none yet, 1: being written, 2: done (once per process)

struct sigaction g_prev[kMaxSignal];
std::atomic<bool> g_installed[kMaxSignal];

long this_tid() { return ::syscall(SYS_gettid); }

void pause_ms(long ms) {
  timespec ts{0, ms * 1000000L};
  while (::nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

bool write_end(int fd, const Image& img) {
  uint8_t buf[sizeof(dump::ChunkHeader) + sizeof(dump::EndEntry)];
  const dump::EndEntry end{detail::now(), img.records_written, img.records_dropped};
  const dump::ChunkHeader h = dump::make_chunk_header(dump::ChunkType::kEnd, 1, &end, sizeof(end));
  std::memcpy(buf, &h, sizeof(h));
  std::memcpy(buf + sizeof(h), &end, sizeof(end));
  return dump::write_whole(fd, buf, sizeof(buf));
}

// The whole image into its file, then renamed over the output (unless a special file or a symlink is there).
void write_image(const Image& img) {
  const dump::HoldFileSizeSignal hold;  // past a file-size limit: a torn image left at the temporary, not SIGXFSZ
  // No preopened file (an adaptive run's output is its streamed baseline): the temporary is made now, with
  // open(2), which is async-signal-safe; one already there is never written over.
  const int fd = img.fd >= 0 ? img.fd : ::open(img.temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0 || ::lseek(fd, 0, SEEK_SET) != 0 || ::ftruncate(fd, 0) != 0) return;
  bool ok = true;
  for (const auto& seg : img.meta) ok = ok && dump::write_whole(fd, seg.data(), seg.size());
  if (img.window)
    for (const auto& chunk : *img.window) ok = ok && dump::write_whole(fd, chunk.data(), chunk.size());
  if (img.windows) ok = ok && img.windows->write_events_to(fd);
  ok = ok && dump::write_whole(fd, img.sampling.data(), img.sampling.size());
  ok = ok && dump::write_whole(fd, img.drops.data(), img.drops.size()) && write_end(fd, img);
  if (img.fd < 0) ::close(fd);
  if (!ok) return;  // a torn dump never replaces the output: it stays at the temporary
  struct stat st{};
  if (::lstat(img.output.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) return;
  ::rename(img.temp.c_str(), img.output.c_str());
}

// Once per process; a second thread that crashes meanwhile waits (up to 5 s) for the first to finish.
void write_once() {
  int expected = 0;
  if (!g_dump_state.compare_exchange_strong(expected, 1)) {
    for (int i = 0; i < 5000 && g_dump_state.load() == 1; ++i) pause_ms(1);
    return;
  }
  g_crashing.store(true);
  const bool self_updating = g_updater_tid.load() == this_tid();  // the writer itself crashed mid-update
  for (int i = 0; i < 500 && g_updating.load() && !self_updating; ++i) pause_ms(1);
  Image* img = g_image.load();
  if (img && !g_updating.load() && g_owner.load() == ::getpid()) write_image(*img);
  g_dump_state.store(2);
}

// What the signal does without us: the previous handler, or the previous disposition restored and the
// signal delivered again (sent again when it was sent; a fault recurs when the handler returns).
// True when the program's own handler ran and returned: the program goes on.
bool chain(int sig, siginfo_t* info, void* context) {
  const struct sigaction& prev = g_prev[sig];
  if ((prev.sa_flags & SA_SIGINFO) && prev.sa_sigaction) {
    prev.sa_sigaction(sig, info, context);
    return true;
  }
  if (!(prev.sa_flags & SA_SIGINFO) && prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN) {
    prev.sa_handler(sig);
    return true;
  }
  ::sigaction(sig, &prev, nullptr);
  if (!info || info->si_code <= 0) ::raise(sig);  // kill, raise, abort: pending until this handler returns
  return false;
}

void on_crash_signal(int sig, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  if (g_image.load() && g_owner.load() == ::getpid()) write_once();
  // The program handled the signal (guard pages, a runtime that recovers): recording goes on. The dump is still
  // written once per process, so a program that faults often pays for it once.
  if (chain(sig, info, context) && g_dump_state.load() == 2) g_crashing.store(false);
  errno = saved_errno;
}

}  // namespace

void arm(Image* image) {
  g_owner.store(::getpid());
  g_image.store(image);
}

bool begin_update() {
  g_updater_tid.store(this_tid());
  g_updating.store(true);
  if (!g_crashing.load()) return true;
  g_updating.store(false);
  return false;
}

void end_update() {
  g_updating.store(false);
  g_updater_tid.store(0);
}

void install_handlers() {
  // crc32c keeps tables in function-local statics: made here, never first inside a handler (a guard's lock).
  static const std::vector<uint8_t> warm(64 * 1024, 0);
  (void)dump::crc32c(warm.data(), warm.size());
  for (int sig : kSignals) {
    if (g_installed[sig].load()) continue;
    struct sigaction sa{};
    sa.sa_sigaction = on_crash_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    if (::sigaction(sig, &sa, &g_prev[sig]) == 0) g_installed[sig].store(true);
  }
}

void restore_in_child() {
  g_image.store(nullptr);
  g_owner.store(0);
  g_crashing.store(false);
  g_updating.store(false);
  g_updater_tid.store(0);
  g_dump_state.store(0);
  for (int sig : kSignals) {
    if (!g_installed[sig].exchange(false)) continue;
    struct sigaction cur{};
    if (::sigaction(sig, nullptr, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_crash_signal)
      ::sigaction(sig, &g_prev[sig], nullptr);
  }
}

}  // namespace inferscope::runtime::crash
