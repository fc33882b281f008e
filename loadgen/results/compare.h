// `rsslab_loadgen compare BASE NEW`: what changed between two sets of runs,
// figure by figure, and whether the change is more than noise.
//
//   auto base = rsslab::LoadCompareSide("results/sweep-glibc/run");
//   auto neu = rsslab::LoadCompareSide("results/sweep-arena2/run");
//   rsslab::CompareOptions o;                 // alpha 0.05
//   o.thresholds.push_back(*rsslab::ParseThreshold("rss_after_idle>+10%"));
//   absl::StatusOr<rsslab::CompareResult> r = rsslab::Compare(*base, *neu, o);
//   printf("%s", rsslab::CompareText(*r).c_str());
//   // exit 2 if r->Refused(), 1 if !r->crossings.empty() or r->Gate() is a
//   // regression, 3 if it is "can't tell" (o.gate names the gated figures)
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
  // The first fingerprint the run's (or cell's) snapshots carry; unset for
  // runs recorded before snapshots had one.
  std::optional<rsslab::v1::Fingerprint> fingerprint;
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

// The fields of a Fingerprint compare checks, each with the key
// --ignore_fingerprint takes: glibc_version, allocator, allocator_version,
// cpus_online, cpus_allowed, cgroup_cpu_max, thp_enabled, start_env (every
// variable), or one variable's NAME (MALLOC_ARENA_MAX).
inline constexpr const char* kFingerprintKeys[] = {
    "glibc_version", "allocator",      "allocator_version", "cpus_online",
    "cpus_allowed",  "cgroup_cpu_max", "thp_enabled",       "start_env"};
// InvalidArgument naming the key when it is neither a field nor a variable
// name ([A-Z_][A-Z0-9_]*).
absl::Status CheckFingerprintKey(absl::string_view key);

// How `a` and `b` differ, one phrase per field not ignored, e.g.
// "MALLOC_ARENA_MAX at start (unset vs 2)"; each with its key in *keys.
// Fields one of them did not record (empty, 0) are not compared; a variable
// missing from a recorded start_env is "unset". `where_a`/`where_b`, when
// not empty, follow each value ("2 in DIR").
std::vector<std::string> FingerprintDifferences(const rsslab::v1::Fingerprint& a,
                                                const rsslab::v1::Fingerprint& b,
                                                const std::vector<std::string>& ignore,
                                                std::vector<std::string>* keys,
                                                const std::string& where_a = "",
                                                const std::string& where_b = "");
// One line: "glibc 2.36, glibc 2.36, 2 of 2 CPUs, cgroup CPU max, THP
// madvise, start env { MALLOC_ARENA_MAX=2 }".
std::string FingerprintLine(const rsslab::v1::Fingerprint& f);

// The gate's verdict on one figure, from the Hodges-Lehmann shift's
// interval (new - base, at confidence 1 - alpha) and the floor F: the larger
// of the absolute floor (MiB figures only) and the relative floor times the
// base median, so a regression must pass both.
//   regression   the whole interval is beyond +F on the worse side
//   improvement  the whole interval is beyond F on the better side
//   no change    the whole interval lies within [-F, +F]
//   can't tell   otherwise (it straddles a floor), or no interval reaches
//                1 - alpha with these repeats (3 vs 3 at alpha 0.05)
enum class GateVerdict { kNoChange, kImprovement, kRegression, kCantTell };
const char* GateVerdictName(GateVerdict v);  // "no change", "improvement", ...
// "rss" (the five RSS figures) or a comma-separated list of figure keys;
// InvalidArgument naming an unknown one.
absl::StatusOr<std::vector<int>> ParseGateFigures(absl::string_view spec);

struct CompareOptions {
  double alpha = 0.05;
  // The floors of the gate's verdicts (see GateVerdict).
  double floor_mib = 1;
  double floor_pct = 5;
  // Figures whose verdicts decide the exit status (--gate); empty: none.
  std::vector<int> gate;
  bool force = false;  // compare pairs that are not comparable, marked
  std::vector<Threshold> thresholds;
  // Fingerprint keys whose differences are allowed (--ignore_fingerprint).
  std::vector<std::string> ignore_fingerprint;
};

struct FigureResult {
  bool present = false;  // measured on both sides
  std::vector<double> base, neu;  // raw values, one per repeat
  double base_median = 0, new_median = 0;
  double change_pct = 0;   // (new - base) / base; 0 when base is 0
  MannWhitney test;
  bool significant = false;  // p < alpha
  Shift shift;               // Hodges-Lehmann, new - base, raw units
  double floor = 0;          // F in raw units
  GateVerdict verdict = GateVerdict::kCantTell;
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
  // The runs' fingerprints differ (one line, "base and new differ in ...");
  // --force does not override it, --ignore_fingerprint=KEY does, per field.
  std::string fingerprint_mismatch;
  std::vector<std::string> fingerprint_keys;  // the keys that differ
  // The base's first fingerprint (FingerprintLine), empty if none recorded;
  // and how many repeats recorded none.
  std::string fingerprint;
  int unfingerprinted = 0;
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
  // Some pair is not comparable and --force was not given, or some pair's
  // fingerprints differ: nothing compared.
  bool Refused() const;
  // Thresholds that no pair could trip (too few repeats for alpha).
  std::vector<std::string> Unreachable() const;
  // The gate over the --gate figures of every pair: kRegression if any is a
  // regression, else kCantTell if any can't tell, else kNoChange (also with
  // no gate figures); `why` (may be null) lists "pair figure: verdict".
  std::vector<int> gate;
  double floor_mib = 1, floor_pct = 5;
  GateVerdict Gate(std::vector<std::string>* why) const;
};

// InvalidArgument when nothing can be paired (a sentence naming what each
// side holds).
absl::StatusOr<CompareResult> Compare(const CompareSide& base, const CompareSide& neu,
                                      const CompareOptions& options);

std::string CompareText(const CompareResult& r);
std::string CompareMarkdown(const CompareResult& r);
// One JSON object (also what loadgen/results/plots_and_advice.py --compare plots).
std::string CompareJson(const CompareResult& r);

}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_RESULTS_COMPARE_H_
