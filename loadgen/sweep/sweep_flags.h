// The flags that shape and place a sweep: the matrix from flags (--profiles,
// --threads_list, --repeats), where its cells run (--agent, --agents_file,
// --local and its binaries and CPUs), which cells (--cells, --cell_index_env,
// --print_cells) and where their records go (--results_dir).
//
//   #include "loadgen/sweep/sweep_flags.h"
//   if (absl::GetFlag(FLAGS_local)) ...
#ifndef RSSLAB_LOADGEN_SWEEP_SWEEP_FLAGS_H_
#define RSSLAB_LOADGEN_SWEEP_SWEEP_FLAGS_H_

#include <cstdint>
#include <string>

#include "absl/flags/declare.h"
#include "absl/time/time.h"

ABSL_DECLARE_FLAG(std::string, agent);
ABSL_DECLARE_FLAG(std::string, agents_file);
ABSL_DECLARE_FLAG(int, cell_attempts);
ABSL_DECLARE_FLAG(std::string, ok_exit_codes);
ABSL_DECLARE_FLAG(std::string, cells);
ABSL_DECLARE_FLAG(std::string, cell_index_env);
ABSL_DECLARE_FLAG(bool, print_cells);
ABSL_DECLARE_FLAG(bool, local);
ABSL_DECLARE_FLAG(std::string, server_binary);
ABSL_DECLARE_FLAG(std::string, profile_file);
ABSL_DECLARE_FLAG(std::string, handler_dirs);
ABSL_DECLARE_FLAG(std::string, server_cpus);
ABSL_DECLARE_FLAG(std::string, loadgen_cpus);
ABSL_DECLARE_FLAG(int, log_max_mb);
ABSL_DECLARE_FLAG(std::string, results_dir);
ABSL_DECLARE_FLAG(std::string, profiles);
ABSL_DECLARE_FLAG(std::string, threads_list);
ABSL_DECLARE_FLAG(int, repeats);

#endif  // RSSLAB_LOADGEN_SWEEP_SWEEP_FLAGS_H_
