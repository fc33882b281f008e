#include "loadgen/results/compare_main.h"

#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/echo.h"
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
ABSL_FLAG(std::string, plot, "compare.png",
          "compare: write the base-vs-new plot here (needs python3-matplotlib); empty: no plot.");
ABSL_FLAG(std::string, fail_if, "",
          "compare: exit 1 when a significant change crosses this, e.g. "
          "'rss_after_idle>+10%' or 'qps<-5%'; several: repeat the flag or separate with commas.");

namespace rsslab {
namespace {

constexpr int kExitCrossed = 1;
constexpr int kExitUsage = 2;

int Fail(const std::string& msg) {
  fprintf(stderr, "rsslab_loadgen: compare: %s\n", msg.c_str());
  return kExitUsage;
}

// Every --fail_if value on the command line, in order (absl keeps the last).
std::vector<std::string> FailIfSpecs(const std::vector<std::string>& argv) {
  std::vector<std::string> out;
  for (size_t i = 1; i < argv.size(); ++i) {
    absl::string_view a = argv[i];
    if (a == "--") break;
    if (!absl::ConsumePrefix(&a, "--")) absl::ConsumePrefix(&a, "-");
    std::string value;
    if (absl::ConsumePrefix(&a, "fail_if=")) {
      value = std::string(a);
    } else if (a == "fail_if" && i + 1 < argv.size()) {
      value = argv[++i];
    } else {
      continue;
    }
    for (absl::string_view v : absl::StrSplit(value, ',', absl::SkipWhitespace())) {
      out.push_back(std::string(absl::StripAsciiWhitespace(v)));
    }
  }
  return out;
}

// False (after one line on stderr) when no plot was written.
bool Plot(const CompareResult& r, const std::string& png) {
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

}  // namespace

namespace {

// Every flag checked before anything is read; a usage error names the flag.
absl::StatusOr<CompareOptions> OptionsFromFlags(const std::vector<std::string>& argv) {
  // A plot that cannot be written is a usage error before anything is read.
  const std::string png = absl::GetFlag(FLAGS_plot);
  if (!png.empty()) {
    const size_t slash = png.find_last_of('/');
    const std::string dir = slash == std::string::npos ? "." : png.substr(0, slash == 0 ? 1 : slash);
    if (access(dir.c_str(), W_OK | X_OK) != 0) {
      return absl::InvalidArgumentError(absl::StrCat("--plot=", Echo(png), ": cannot write into ",
                                                     Echo(dir), ": ", strerror(errno),
                                                     " (--plot= writes no plot)"));
    }
  }
  CompareOptions o;
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
  for (const std::string& spec : FailIfSpecs(argv)) {
    absl::StatusOr<Threshold> t = ParseThreshold(spec);
    if (!t.ok()) return t.status();
    o.thresholds.push_back(*t);
  }
  return o;
}

void PrintRefusals(const CompareResult& r) {
  for (const PairResult& p : r.pairs) {
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
  absl::StatusOr<CompareOptions> o = OptionsFromFlags(argv);
  if (!o.ok()) return Fail(std::string(o.status().message()));
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
  if (absl::GetFlag(FLAGS_json)) {
    out = CompareJson(*r);
  } else if (absl::GetFlag(FLAGS_format) == "md") {
    out = CompareMarkdown(*r);
  } else {
    out = CompareText(*r);
  }
  fwrite(out.data(), 1, out.size(), stdout);
  fflush(stdout);
  for (const std::string& spec : r->Unreachable()) {
    fprintf(stderr,
            "rsslab_loadgen: compare: --fail_if=%s can never fire here: too few repeats for a "
            "significant change at alpha %g (see the note under each pair)\n",
            spec.c_str(), o->alpha);
  }
  const std::string png = absl::GetFlag(FLAGS_plot);
  const bool plotted = png.empty() || Plot(*r, png);
  if (!r->crossings.empty()) return kExitCrossed;
  return plotted ? 0 : 1;
}

}  // namespace rsslab
