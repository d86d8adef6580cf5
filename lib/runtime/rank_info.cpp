#include "runtime/rank_info.hpp"

#include <algorithm>
#include <cstring>

namespace inferscope::detail {
namespace {

struct Launcher {
  const char* source;
  const char* rank;
  const char* size;
  const char* local_rank;
};
// In this order: torchrun's variables win when an MPI launcher started torchrun's agent.
constexpr Launcher kLaunchers[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
};

bool is_number(const char* v) {
  if (!v) return false;
  const size_t n = std::strlen(v);
  return n > 0 && n < 10 && std::all_of(v, v + n, [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

std::vector<std::pair<std::string, std::string>> rank_info(GetEnv getenv) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const Launcher& l : kLaunchers) {
    const char* rank = getenv(l.rank);
    if (!is_number(rank)) continue;
    out.emplace_back("rank", rank);
    out.emplace_back("rank_source", l.source);
    if (const char* v = getenv(l.size); is_number(v)) out.emplace_back("world_size", v);
    if (const char* v = getenv(l.local_rank); is_number(v)) out.emplace_back("local_rank", v);
    break;
  }
  return out;
}

}  // namespace inferscope::detail
