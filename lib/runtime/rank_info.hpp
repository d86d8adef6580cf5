// The process's rank in a multi-process job, as its launcher set it in the environment: torchrun (RANK,
// LOCAL_RANK, WORLD_SIZE), Open MPI, PMI (MPICH, Intel MPI) and Slurm. Written into the dump's process info
// ("rank", "rank_source", "world_size", "local_rank") so the analyzer can tell one run's ranks apart
// (docs/multi-gpu.md).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace inferscope::detail {

using GetEnv = char* (*)(const char*);  // std::getenv, or a test's stand-in

/// The rank keys for the first launcher whose rank variable holds a number; empty when none does.
std::vector<std::pair<std::string, std::string>> rank_info(GetEnv getenv);

}  // namespace inferscope::detail
