// Replays fuzz inputs through a fuzz target without libFuzzer, so the inputs that once crashed stay covered
// by ctest in every build (tests/report/CMakeLists.txt):  replay DIR_OR_FILE...
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  size_t n = 0;
  auto run = [&](const std::filesystem::path& p) {
    std::ifstream f(p, std::ios::binary);
    std::vector<uint8_t> d((std::istreambuf_iterator<char>(f)), {});
    LLVMFuzzerTestOneInput(d.data(), d.size());
    ++n;
  };
  for (int i = 1; i < argc; ++i) {
    if (std::filesystem::is_directory(argv[i])) {
      for (const auto& e : std::filesystem::directory_iterator(argv[i]))
        if (e.is_regular_file()) run(e.path());
    } else {
      run(argv[i]);
    }
  }
  std::printf("replayed %zu inputs without a crash\n", n);
  return n > 0 ? 0 : 1;
}
