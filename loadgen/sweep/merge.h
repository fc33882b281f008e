// `rsslab_loadgen merge --out=DIR RUN_DIR...`: run directories of the same
// sweep matrix, made anywhere (batch tasks, pods, agents, one machine), put
// together into one run directory with the same events.jsonl a one-machine
// sweep writes, so the same summary, plots and "What to do" come out.
//
//   rsslab::MergeResult r;
//   absl::Status s = rsslab::MergeRunDirs({"results/slurm"}, "results/merged", &r);
//   // r.summary: the sweep summary of the merged records (INCOMPLETE when
//   // cells are missing); r.notes: what merge skipped and why.
//
// Inputs: a run directory (it holds events.jsonl), or a directory of run
// directories (each immediate subdirectory with an events.jsonl; a merged
// output among them is skipped). Every input must carry the same matrix id
// in its header; another matrix is refused naming what differs, unless
// MergeOptions::union_profiles and only the profiles differ.
//
// Attempts: each run of a cell is one attempt (in a run that re-queued a
// cell on another agent, each try is one). Attempts are numbered per cell by
// start time and every record keeps its attempt; the latest successful one
// counts. An attempt without a result (its task was killed mid-cell, or is
// still running) keeps its records and gets a failed result saying so.
//
// Idempotent: the output is rebuilt from the inputs each time (written to a
// temporary file, then renamed), so merging again while cells still arrive
// just gives a fuller table.
//
// Streaming: the inputs are read a record at a time, and only where each
// attempt's records are is kept; the output is written a record at a time.
// Memory is bounded by the largest record, not the inputs' sum. Attempts
// whose records are byte for byte those of one already read (a copy of a
// run directory, or one reached twice) are counted once.
#ifndef RSSLAB_LOADGEN_SWEEP_MERGE_H_
#define RSSLAB_LOADGEN_SWEEP_MERGE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "loadgen/results/sweep_summary.h"

namespace rsslab {

struct MergeResult {
  std::vector<std::string> run_dirs;  // the run directories merged
  int attempts = 0;
  int unfinished_attempts = 0;  // without a cell_result: killed or running
  std::vector<std::string> notes;  // skipped inputs, unreadable lines
  SweepSummary summary;
};

struct MergeOptions {
  // Inputs whose matrices differ only in their profiles (the same steps,
  // threads, repeats, handler and load flags) merge into one matrix of every
  // profile: the first input's, then each new one in the order met. Adds
  // profiles measured later to a committed sweep. Off: another matrix is
  // refused.
  bool union_profiles = false;
};

// INVALID_ARGUMENT (exit 2) for bad input: no run directory, not a sweep,
// another matrix (naming what differs), --out among the inputs or holding
// something other than a merge.
absl::Status MergeRunDirs(const std::vector<std::string>& inputs, const std::string& out,
                          MergeResult* result);
absl::Status MergeRunDirs(const std::vector<std::string>& inputs, const std::string& out,
                          const MergeOptions& options, MergeResult* result);

}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_SWEEP_MERGE_H_
