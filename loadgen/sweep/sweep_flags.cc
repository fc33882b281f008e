#include "loadgen/sweep/sweep_flags.h"

#include <cstdint>
#include <string>

#include "absl/flags/flag.h"
#include "absl/time/time.h"

ABSL_FLAG(std::string, agent, "",
          "Sweeps: rsslab_agent address (HOST:PORT) that launches each cell's server; several, "
          "comma-separated, run one cell each at a time (the next cell to whichever is free).");
ABSL_FLAG(std::string, agents_file, "",
          "Sweeps: a file of rsslab_agent addresses, one HOST:PORT per line (# comments), "
          "instead of --agent.");
ABSL_FLAG(int, cell_attempts, 3,
          "Sweeps: attempts per cell when its host fails it (agent lost, server killed by "
          "SIGKILL from outside); the cell is queued again for another agent. 1..10.");
ABSL_FLAG(std::string, ok_exit_codes, "0",
          "Sweeps: the exit codes of a cell's program after the sweep stopped it that are a "
          "clean stop, comma-separated (e.g. 0,143); death by SIGTERM always is (Python's "
          "default). A program that ends before the stop fails its cell, its steps kept.");
ABSL_FLAG(std::string, cells, "",
          "Sweeps: run only these cells of the matrix, e.g. 3,7-9 (indices as --print_cells "
          "numbers them, 0-based).");
ABSL_FLAG(std::string, cell_index_env, "",
          "Sweeps: run the one cell whose index is in this environment variable, e.g. "
          "JOB_COMPLETION_INDEX (a Kubernetes Indexed Job) or SLURM_ARRAY_TASK_ID (a Slurm job "
          "array), so a batch system's command needs no shell.");
ABSL_FLAG(bool, print_cells, false,
          "Sweeps: print the matrix's numbered cells (index, profile, threads, repeat) and "
          "exit; with --json as JSON with the matrix id.");
ABSL_FLAG(bool, local, false,
          "Sweeps: no agent; the loadgen launches each cell's server itself on this machine "
          "(same launch and verification as rsslab_agent), pinned apart from the loadgen "
          "(--server_cpus, --loadgen_cpus). The command a batch task or a pod runs.");
ABSL_FLAG(std::string, server_binary, "",
          "--local: the rsslab_server to launch (default: bin/rsslab_server beside this binary).");
ABSL_FLAG(std::string, profile_file, "",
          "--local: the allocator profiles (default: the shipped agent/profiles.textproto).");
ABSL_FLAG(std::string, handler_dirs, "",
          "--local: directories holding NAME.py handlers, comma-separated (default: the "
          "shipped server/handlers).");
ABSL_FLAG(std::string, server_cpus, "",
          "--local: CPUs for the server, e.g. 0 or 0-1 (with --loadgen_cpus, disjoint; default: "
          "the first half of the CPUs this process may use).");
ABSL_FLAG(int, log_max_mb, 8,
          "--local: each cell's program log (servers/CELL.log in the run directory) is capped "
          "at this many MiB (1 to 65536) as rsslab_agent's are: its first and last quarter of "
          "the cap kept, the middle dropped with a line saying how many bytes went. 0: no cap.");
ABSL_FLAG(std::string, loadgen_cpus, "",
          "--local: CPUs for the loadgen itself (default: the second half).");
ABSL_FLAG(std::string, results_dir, "",
          "Sweeps: instead of --out, the cells' run directory under this one, "
          "cell-INDEX-MATRIX (a shared directory every batch task writes into; `merge` reads "
          "them all). The same command again resumes it in place: cells done are kept.");
ABSL_FLAG(std::string, profiles, "", "Sweeps: profiles to run, comma-separated (replaces the scenario's).");
ABSL_FLAG(std::string, threads_list, "", "Sweeps: worker thread counts, comma-separated, e.g. 1,4,16,64.");
ABSL_FLAG(int, repeats, 0, "Sweeps: repeats per profile x threads (replaces the scenario's).");
