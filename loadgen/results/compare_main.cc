#include "loadgen/results/compare_main.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/untrusted_text.h"
#include "common/files.h"
#include "loadgen/results/compare.h"
#include "loadgen/results/report_main.h"  // --report_tool
#include "loadgen/results/report_tool.h"

ABSL_FLAG(std::string, format, "text", "compare: output format, text or md (Markdown).");
ABSL_FLAG(bool, json, false,
          "compare: print the comparison as one JSON object instead; --print_cells: the cells as JSON.");
ABSL_FLAG(bool, force, false,
          "compare: compare pairs that are not comparable (other steps or scale, a cache that "
          "never filled) anyway; they are marked FORCED.");
ABSL_FLAG(double, alpha, 0.05, "compare: significance level of the Mann-Whitney U test.");
ABSL_FLAG(std::string, plot, "",
          "compare: write the base-vs-new plot here (needs python3-matplotlib); default: beside "
          "the table when stdout is a file (> DIR/NAME.md: DIR/NAME.png); --plot= writes none.");
ABSL_FLAG(std::string, fail_if, "",
          "compare: exit 1 when a significant change crosses this, e.g. "
          "'rss_after_idle>+10%' or 'qps<-5%'; several: repeat the flag or separate with commas.");

ABSL_FLAG(std::string, ignore_fingerprint, "",
          "compare: fingerprint fields allowed to differ between the runs, comma-separated: "
          "glibc_version, allocator, allocator_version, cpus_online, cpus_allowed, "
          "cgroup_cpu_max, thp_enabled, start_env, or a variable's NAME (MALLOC_ARENA_MAX).");

ABSL_FLAG(std::string, gate, "",
          "compare: figures whose verdicts decide the exit status (1 regression, 3 can't tell, "
          "0 otherwise): rss (the five RSS figures) or figure keys, comma-separated.");
ABSL_FLAG(double, floor_mib, 1,
          "compare: absolute floor of a verdict on a MiB figure: a regression must exceed it "
          "and --floor_pct.");
ABSL_FLAG(double, floor_pct, 5,
          "compare: relative floor of a verdict, percent of the base median.");

namespace rsslab {
namespace {

constexpr int kExitCrossed = 1;
constexpr int kExitUsage = 2;
constexpr int kExitCantTell = 3;

int Fail(const std::string& msg) {
  fprintf(stderr, "rsslab_loadgen: compare: %s\n", msg.c_str());
  return kExitUsage;
}

// How the comparison is printed: --format and --json, parsed once.
enum class Format { kText, kMarkdown, kJson };

// Every value --NAME (or -NAME) has on the command line, in order (absl
// keeps only the last).
std::vector<std::string> FlagValues(const std::vector<std::string>& argv, absl::string_view name) {
  std::vector<std::string> out;
  for (size_t i = 1; i < argv.size(); ++i) {
    absl::string_view a = argv[i];
    if (a == "--") break;
    if (!absl::ConsumePrefix(&a, "--")) absl::ConsumePrefix(&a, "-");
    if (absl::string_view v = a; absl::ConsumePrefix(&v, name) && absl::ConsumePrefix(&v, "=")) {
      out.push_back(std::string(v));
    } else if (a == name && i + 1 < argv.size()) {
      out.push_back(argv[++i]);
    }
  }
  return out;
}

// Every --fail_if value, each split at its commas.
std::vector<std::string> FailIfSpecs(const std::vector<std::string>& argv) {
  std::vector<std::string> out;
  for (const std::string& value : FlagValues(argv, "fail_if")) {
    for (absl::string_view v : absl::StrSplit(value, ',', absl::SkipWhitespace())) {
      out.push_back(std::string(absl::StripAsciiWhitespace(v)));
    }
  }
  return out;
}

}  // namespace

bool PlotCompare(const CompareResult& r, const std::string& png) {
  char tmpl[] = "/tmp/rsslab-compare-XXXXXX.json";
  const int fd = mkstemps(tmpl, 5);
  if (fd < 0) {
    fprintf(stderr, "rsslab_loadgen: compare: no plot: cannot create a temporary file\n");
    return false;
  }
  close(fd);
  if (absl::Status w = WriteFileAtomically(tmpl, CompareJson(r)); !w.ok()) {
    unlink(tmpl);
    fprintf(stderr, "rsslab_loadgen: compare: no plot: %s\n", std::string(w.message()).c_str());
    return false;
  }
  std::string tool = absl::GetFlag(FLAGS_report_tool);
  if (tool.empty()) tool = FindReportTool();
  std::string output;
  absl::Status s = RunReportToolArgs(tool, {"--compare", tmpl, "--png", png}, &output);
  unlink(tmpl);
  // The tool's own words, escaped and capped (a traceback is not a message).
  if (!output.empty()) fprintf(stderr, "%s", EchoMultiline(output, 2048).c_str());
  if (!s.ok()) {
    fprintf(stderr, "rsslab_loadgen: compare: no plot: %s\n", Echo(s.message(), 512).c_str());
    return false;
  }
  return true;
}

std::string PlotBeside(int fd, std::string* why) {
  struct stat out;
  if (fstat(fd, &out) != 0 || !S_ISREG(out.st_mode)) {
    *why = "stdout is not a file to put it beside (--plot=PATH writes one)";
    return "";
  }
  char buf[PATH_MAX];
  const ssize_t n = readlink(absl::StrCat("/proc/self/fd/", fd).c_str(), buf, sizeof(buf) - 1);
  const std::string table = n > 0 ? std::string(buf, n) : "";
  struct stat named;
  // A deleted or renamed file's link is no path to write beside.
  if (table.empty() || table[0] != '/' || stat(table.c_str(), &named) != 0 ||
      named.st_dev != out.st_dev || named.st_ino != out.st_ino) {
    *why = "the file stdout writes to has no path (--plot=PATH writes one)";
    return "";
  }
  const size_t slash = table.find_last_of('/');
  std::string name = table.substr(slash + 1);
  const size_t dot = name.find_last_of('.');
  if (dot != std::string::npos && dot > 0) name.resize(dot);
  std::string png = absl::StrCat(table.substr(0, slash + 1), name, ".png");
  if (png == table) {
    *why = "stdout is itself a .png (--plot=PATH writes one elsewhere)";
    return "";
  }
  return png;
}

namespace {

// What CompareMain needs besides the comparison's own options.
struct MainOptions {
  CompareOptions compare;
  Format format = Format::kText;
  std::string png;          // empty: no plot
  std::string no_plot_why;  // the default found no place for it: why
};

// Every flag checked before anything is read; a usage error names the flag.
absl::StatusOr<MainOptions> OptionsFromFlags(const std::vector<std::string>& argv) {
  MainOptions m;
  // --plot as given, else beside the table. A plot that cannot be written
  // is a usage error before anything is read.
  const std::string png = FlagValues(argv, "plot").empty()
                              ? PlotBeside(STDOUT_FILENO, &m.no_plot_why)
                              : absl::GetFlag(FLAGS_plot);
  if (!png.empty()) {
    const size_t slash = png.find_last_of('/');
    const std::string dir = slash == std::string::npos ? "." : png.substr(0, slash == 0 ? 1 : slash);
    if (access(dir.c_str(), W_OK | X_OK) != 0) {
      return absl::InvalidArgumentError(absl::StrCat("--plot=", Echo(png), ": cannot write into ",
                                                     Echo(dir), ": ", strerror(errno),
                                                     " (--plot= writes no plot)"));
    }
  }
  m.png = png;
  CompareOptions& o = m.compare;
  o.alpha = absl::GetFlag(FLAGS_alpha);
  if (!(o.alpha > 0 && o.alpha < 1)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--alpha=%g: use a level between 0 and 1, e.g. 0.05", o.alpha));
  }
  o.force = absl::GetFlag(FLAGS_force);
  const std::string format = absl::GetFlag(FLAGS_format);
  if (format != "text" && format != "md") {
    return absl::InvalidArgumentError(
        absl::StrFormat("--format=%s: use text or md (or --json)", format));
  }
  if (absl::GetFlag(FLAGS_json) && format == "md") {
    return absl::InvalidArgumentError("--json and --format=md are alternatives; set one");
  }
  m.format = absl::GetFlag(FLAGS_json) ? Format::kJson
             : format == "md"          ? Format::kMarkdown
                                       : Format::kText;
  o.floor_mib = absl::GetFlag(FLAGS_floor_mib);
  if (!(o.floor_mib >= 0 && o.floor_mib <= 1e6)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--floor_mib=%g: use a size in MiB from 0 to 1000000, e.g. 1", o.floor_mib));
  }
  o.floor_pct = absl::GetFlag(FLAGS_floor_pct);
  if (!(o.floor_pct >= 0 && o.floor_pct <= 1000)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--floor_pct=%g: use a percentage from 0 to 1000, e.g. 5", o.floor_pct));
  }
  absl::StatusOr<std::vector<int>> gate = ParseGateFigures(absl::GetFlag(FLAGS_gate));
  if (!gate.ok()) return gate.status();
  o.gate = *gate;
  for (absl::string_view k :
       absl::StrSplit(absl::GetFlag(FLAGS_ignore_fingerprint), ',', absl::SkipWhitespace())) {
    k = absl::StripAsciiWhitespace(k);
    if (absl::Status s = CheckFingerprintKey(k); !s.ok()) return s;
    if (o.ignore_fingerprint.size() >= 256) {
      return absl::InvalidArgumentError("--ignore_fingerprint: more than 256 fields");
    }
    o.ignore_fingerprint.push_back(std::string(k));
  }
  for (const std::string& spec : FailIfSpecs(argv)) {
    absl::StatusOr<Threshold> t = ParseThreshold(spec);
    if (!t.ok()) return t.status();
    o.thresholds.push_back(*t);
  }
  return m;
}

void PrintRefusals(const CompareResult& r) {
  for (const PairResult& p : r.pairs) {
    if (!p.fingerprint_mismatch.empty()) {
      fprintf(stderr,
              "rsslab_loadgen: compare: %s; not comparable (--ignore_fingerprint=%s compares "
              "anyway)\n",
              Echo(p.fingerprint_mismatch, 1024).c_str(),
              Echo(absl::StrJoin(p.fingerprint_keys, ","), 512).c_str());
      continue;
    }
    if (p.refused.empty()) continue;
    fprintf(stderr,
            "rsslab_loadgen: compare: %s and %s are not comparable: %s (--force compares "
            "them anyway, marked)\n",
            p.base_label.c_str(), p.new_label.c_str(), p.refused.c_str());
  }
}

}  // namespace

int CompareMain(const std::vector<std::string>& dirs, const std::vector<std::string>& argv) {
  if (dirs.size() != 2) {
    return Fail(absl::StrFormat(
        "needs two directories, BASE and NEW (got %d): rsslab_loadgen compare BASE NEW "
        "[--fail_if='rss_after_idle>+10%%'] [--format=md | --json] [--force]",
        dirs.size()));
  }
  absl::StatusOr<MainOptions> m = OptionsFromFlags(argv);
  if (!m.ok()) return Fail(std::string(m.status().message()));
  const CompareOptions* o = &m->compare;
  absl::StatusOr<CompareSide> base = LoadCompareSide(dirs[0]);
  if (!base.ok()) return Fail(std::string(base.status().message()));
  absl::StatusOr<CompareSide> neu = LoadCompareSide(dirs[1]);
  if (!neu.ok()) return Fail(std::string(neu.status().message()));
  absl::StatusOr<CompareResult> r = Compare(*base, *neu, *o);
  if (!r.ok()) return Fail(std::string(r.status().message()));
  if (r->Refused()) {
    PrintRefusals(*r);
    return kExitUsage;
  }
  std::string out;
  switch (m->format) {
    case Format::kJson:
      out = CompareJson(*r);
      break;
    case Format::kMarkdown:
      out = CompareMarkdown(*r);
      break;
    case Format::kText:
      out = CompareText(*r);
      break;
  }
  fwrite(out.data(), 1, out.size(), stdout);
  fflush(stdout);
  for (const std::string& spec : r->Unreachable()) {
    fprintf(stderr,
            "rsslab_loadgen: compare: --fail_if=%s can never fire here: too few repeats for a "
            "significant change at alpha %g (see the note under each pair)\n",
            spec.c_str(), o->alpha);
  }
  if (!m->no_plot_why.empty()) {
    fprintf(stderr, "rsslab_loadgen: compare: no plot: %s\n", m->no_plot_why.c_str());
  }
  const bool plotted = m->png.empty() || PlotCompare(*r, m->png);
  const GateVerdict gate = r->Gate(nullptr);
  if (!r->crossings.empty() || gate == GateVerdict::kRegression) return kExitCrossed;
  if (gate == GateVerdict::kCantTell) return kExitCantTell;
  return plotted ? 0 : 1;
}

}  // namespace rsslab
