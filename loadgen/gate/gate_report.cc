#include "loadgen/gate/gate_report.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"

namespace rsslab {
namespace gate {
namespace {

double MedianOf(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// A table cell: no | or newline from a label breaks the row.
std::string Cell(const std::string& s) {
  return absl::StrReplaceAll(s, {{"|", "\\|"}, {"\n", " "}});
}

std::string Num(double v) { return absl::StrFormat(std::fabs(v) >= 100 ? "%.1f" : "%.2f", v); }

std::string ShiftText(int f, const FigureResult& fr) {
  if (!fr.shift.has_interval) return absl::StrFormat("%+.2f [none]", FigureDisplay(f, fr.shift.shift));
  return absl::StrFormat("%+.2f [%+.2f, %+.2f]", FigureDisplay(f, fr.shift.shift),
                         FigureDisplay(f, fr.shift.low), FigureDisplay(f, fr.shift.high));
}

// The figures the gate decides on, or every RSS figure when none is set.
std::vector<int> Figures(const CompareResult& r) {
  if (!r.gate.empty()) return r.gate;
  return {kFigRssUnderLoad, kFigRssAfterIdle, kFigRssTrimGlobal};
}

void PairSection(const CompareResult& r, const PairResult& p, std::string* md) {
  absl::StrAppendFormat(md, "**%s**: %d base vs %d head runs, interleaved\n\n", Cell(p.base_label),
                        p.n_base, p.n_new);
  // The interval's own coverage is at least 1 - alpha; the header says the asked level.
  absl::StrAppendFormat(md,
                        "| figure | base | head | shift [%.0f%% interval] | floor | verdict |\n"
                        "|---|---:|---:|---|---:|---|\n",
                        100 * (1 - r.alpha));
  for (int f : Figures(r)) {
    const FigureResult& fr = p.figure[f];
    const CompareFigureInfo& info = FigureInfo(f);
    const std::string title =
        *info.unit ? absl::StrCat(info.title, " (", info.unit, ")") : std::string(info.title);
    if (!fr.present) {
      absl::StrAppendFormat(md, "| %s | - | - | - | - | not measured |\n", title);
      continue;
    }
    absl::StrAppendFormat(md, "| %s | %s | %s | %s | %s | **%s** |\n", title,
                          Num(FigureDisplay(f, fr.base_median)), Num(FigureDisplay(f, fr.new_median)),
                          ShiftText(f, fr), Num(FigureDisplay(f, fr.floor)),
                          GateVerdictName(fr.verdict));
  }
  absl::StrAppend(md, "\n```text\n");
  for (int f : Figures(r)) {
    const FigureResult& fr = p.figure[f];
    if (!fr.present) continue;
    std::vector<double> b, h;
    for (double v : fr.base) b.push_back(FigureDisplay(f, v));
    for (double v : fr.neu) h.push_back(FigureDisplay(f, v));
    absl::StrAppend(md, FigureInfo(f).title, "\n", StripPlot(b, h, FigureInfo(f).unit), "\n");
  }
  absl::StrAppend(md, "```\n\n");
  if (!p.fingerprint.empty()) {
    absl::StrAppend(md, "Fingerprint (the same on every run): `", Cell(p.fingerprint), "`");
    if (p.unfingerprinted > 0) absl::StrAppendFormat(md, " (%d runs recorded none)", p.unfingerprinted);
    absl::StrAppend(md, "\n\n");
  }
}

}  // namespace

std::string StripPlot(const std::vector<double>& base, const std::vector<double>& head,
                      const char* unit, int width) {
  double lo = 0, hi = 0;
  bool any = false;
  for (const auto* v : {&base, &head}) {
    for (double x : *v) {
      lo = any ? std::min(lo, x) : x;
      hi = any ? std::max(hi, x) : x;
      any = true;
    }
  }
  if (!any) return "  (no runs)\n";
  if (hi - lo < 1e-9) hi = lo + 1;  // one value: a flat axis
  auto col = [&](double x) {
    return std::clamp(static_cast<int>(std::lround((x - lo) / (hi - lo) * (width - 1))), 0, width - 1);
  };
  std::string out;
  const char* names[2] = {"base", "head"};
  const char marks[2] = {'o', 'x'};
  int i = 0;
  for (const auto* v : {&base, &head}) {
    std::vector<int> count(width, 0);
    for (double x : *v) ++count[col(x)];
    std::string row(width, ' ');
    for (int c = 0; c < width; ++c) {
      if (count[c] == 1) row[c] = marks[i];
      if (count[c] > 1) row[c] = count[c] > 9 ? '+' : static_cast<char>('0' + count[c]);
    }
    if (!v->empty()) {
      const int m = col(MedianOf(*v));
      if (count[m] == 0) row[m] = '|';
    }
    absl::StrAppendFormat(&out, "  %s |%s|\n", names[i], row);
    ++i;
  }
  // The ends under the first and the last column.
  const std::string left = Num(lo), right = Num(hi);
  const int gap = std::max(1, width - static_cast<int>(left.size() + right.size()));
  absl::StrAppend(&out, "        ", left, std::string(gap, ' '), right, " ", unit, "\n");
  return out;
}

std::string GateMarkdown(const CompareResult& r, const ReportInfo& info) {
  std::string md = absl::StrFormat("## Memory gate: %s\n\n", info.verdict);
  absl::StrAppendFormat(&md, "- base: `%s`\n- head: `%s`\n", Cell(info.base), Cell(info.head));
  absl::StrAppendFormat(&md, "- stopped: %s, after %.0f s; exit status %d\n", info.stopped,
                        info.elapsed_s, info.exit_code);
  absl::StrAppendFormat(&md,
                        "- verdict per figure from the Hodges-Lehmann shift (head - base) and its "
                        "interval at %.0f%%: a regression lies wholly beyond the floor, the larger "
                        "of %g MiB and %g%% of the base median; \"can't tell\" means more runs are "
                        "needed\n- runs: `%s`\n\n",
                        100 * (1 - r.alpha), r.floor_mib, r.floor_pct, Cell(info.out));
  for (const PairResult& p : r.pairs) PairSection(r, p, &md);
  absl::StrAppend(&md, "`o` base run, `x` head run, a digit: that many runs in one column, "
                       "`|`: a side's median.\n");
  if (!info.png.empty()) {
    const std::string name = info.png.substr(info.png.rfind('/') + 1);
    absl::StrAppend(&md, "Every figure's runs, plotted: `", Cell(name), "` beside this report.\n");
  }
  return md;
}

}  // namespace gate
}  // namespace rsslab
