// `rsslab_loadgen compare BASE NEW`: what changed between two sets of runs,
// figure by figure, and whether the change is more than noise.
//
//   auto base = rsslab::LoadCompareSide("results/sweep-glibc/run");
//   auto neu = rsslab::LoadCompareSide("results/sweep-arena2/run");
//   rsslab::CompareOptions o;                 // alpha 0.05
//   o.thresholds.push_back(*rsslab::ParseThreshold("rss_after_idle>+10%"));
//   absl::StatusOr<rsslab::CompareResult> r = rsslab::Compare(*base, *neu, o);
//   printf("%s", rsslab::CompareText(*r).c_str());
//   // exit 2 if r->Refused(), 1 if !r->crossings.empty()
//
// A side is a run directory (holds events.jsonl: one sweep, merged sweeps,
// or one run) or a directory whose subdirectories hold such run directories
// (repeats of a single run). Sweep cells are grouped by profile x threads,
// single runs by scenario x worker threads; each group's completed cells or
// runs are its repeats. Every figure is read by the same readers as the
// summaries (loadgen/results/summary.h, loadgen/results/sweep_summary.h), so compare quotes
// the numbers summary.md shows. The statistics are in loadgen/results/mann_whitney.h.
#ifndef RSSLAB_LOADGEN_RESULTS_COMPARE_H_
#define RSSLAB_LOADGEN_RESULTS_COMPARE_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "loadgen/results/mann_whitney.h"
#include "proto/results.pb.h"

namespace rsslab {

// The figures compared, in output order.
enum CompareFigure {
  kFigRssUnderLoad = 0,    // RSS after fill (cache full)
  kFigRssAfterShrink,      // after the shrink phase's load
  kFigRssAfterIdle,        // after the idle wait
  kFigRssTrimGlobal,       // after the global release
  kFigRssTrimPerThread,    // after the per-thread pass too
  kFigVmHwm,               // largest VmHWM seen
  kFigQps,                 // sweeps: fill step; runs: every load step
  kFigP50,                 // latency, same steps as kFigQps
  kFigP99,
  kFigThreads,             // largest OS thread count seen
  kFigArenas,              // largest glibc arena count seen
  kNumCompareFigures
};

struct CompareFigureInfo {
  const char* key;    // for --fail_if and JSON, e.g. "rss_after_idle"
  const char* title;  // for tables
  const char* unit;   // display unit: MiB, /s, ms, or "" (a count)
  bool higher_is_better;
};
const CompareFigureInfo& FigureInfo(int figure);
// -1 when no figure has this key.
int FigureByKey(absl::string_view key);
// Every key, comma-separated (for error messages).
std::string FigureKeys();
// A raw value (bytes, QPS, microseconds, count) in display units.
double FigureDisplay(int figure, double raw);

// One repeat: a completed sweep cell or a completed run. -1: not measured.
struct CompareSample {
  std::string source;  // run directory, plus " cell ID" for a sweep cell
  int setup = 0;       // index into CompareSide::setups (its header)
  double value[kNumCompareFigures];
  // The fill check (loadgen/results/fill_check.h): unset when the run has no fill
  // phase; `filled` false means not seed 000's conditions.
  std::optional<rsslab::v1::FillCheck> fill;
  CompareSample() {
    for (double& v : value) v = -1;
  }
};

struct CompareGroup {
  bool sweep = false;
  std::string name;  // the profile (sweep) or the scenario (run)
  int threads = 0;   // worker threads (-1: not reported)
  std::string allocator;
  // Single runs: the allocator variables the server started with
  // ("MALLOC_ARENA_MAX=2"), part of the group's identity; empty for sweeps
  // (the profile names the setup).
  std::string env;
  std::vector<CompareSample> samples;
  // "glibc x 64 threads" or "seed, 4 workers (glibc, MALLOC_ARENA_MAX=2)".
  std::string Label() const;
};

struct CompareSetup {
  std::string dir;
  rsslab::v1::Header header;
};

struct CompareSide {
  std::string path;
  std::vector<CompareSetup> setups;  // one per run directory read
  std::vector<CompareGroup> groups;  // in the order first seen
  // Cells and runs left out (failed, incomplete) and unreadable lines.
  std::vector<std::string> notes;
};

// Reads PATH/events.jsonl, or every events.jsonl below PATH (at most 4
// levels down, at most kMaxCompareRuns run directories). PATH@NAME keeps
// only the profile (sweeps) or scenario (runs) NAME. NotFound when there is
// none.
inline constexpr int kMaxCompareRuns = 2000;
absl::StatusOr<CompareSide> LoadCompareSide(const std::string& path);

// --fail_if: "FIGURE>+N%" or "FIGURE<-N%" (the sign of N is optional; N may
// have decimals). Crossed when the change is significant and beyond N.
struct Threshold {
  std::string spec;
  int figure = 0;
  bool greater = true;  // '>': change > pct; '<': change < pct
  double pct = 0;
};
// InvalidArgument with one line naming what is wrong.
absl::StatusOr<Threshold> ParseThreshold(absl::string_view spec);

struct CompareOptions {
  double alpha = 0.05;
  bool force = false;  // compare pairs that are not comparable, marked
  std::vector<Threshold> thresholds;
};

struct FigureResult {
  bool present = false;  // measured on both sides
  std::vector<double> base, neu;  // raw values, one per repeat
  double base_median = 0, new_median = 0;
  double change_pct = 0;   // (new - base) / base; 0 when base is 0
  MannWhitney test;
  bool significant = false;  // p < alpha
};

struct PairResult {
  std::string base_label, new_label;
  int n_base = 0, n_new = 0;
  // Why the two are not comparable (empty: comparable). With --force they
  // are compared anyway and `forced` is set.
  std::string refused;
  bool forced = false;
  // Settings that differ but do not prevent the comparison (load flags,
  // handler, server flags): shown so a reader knows what changed.
  std::vector<std::string> differences;
  FigureResult figure[kNumCompareFigures];
};

struct Crossing {
  std::string spec;
  std::string pair;  // "base label -> new label"
  int figure = 0;
  double change_pct = 0;
  double p = 1;
};

struct CompareResult {
  std::string base_path, new_path;
  double alpha = 0.05;
  std::string pairing;  // how groups were paired, one phrase
  std::vector<PairResult> pairs;
  std::vector<std::string> unpaired;  // groups found on one side only
  std::vector<std::string> notes;     // from both sides
  std::vector<Crossing> crossings;    // thresholds crossed (forced pairs too)
  std::vector<Threshold> thresholds;
  // Some pair is not comparable and --force was not given: nothing compared.
  bool Refused() const;
  // Thresholds that no pair could trip (too few repeats for alpha).
  std::vector<std::string> Unreachable() const;
};

// InvalidArgument when nothing can be paired (a sentence naming what each
// side holds).
absl::StatusOr<CompareResult> Compare(const CompareSide& base, const CompareSide& neu,
                                      const CompareOptions& options);

std::string CompareText(const CompareResult& r);
std::string CompareMarkdown(const CompareResult& r);
// One JSON object (also what tools/report.py --compare plots).
std::string CompareJson(const CompareResult& r);

}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_RESULTS_COMPARE_H_
