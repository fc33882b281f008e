#include "loadgen/results/cells.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/util/message_differencer.h"

namespace rsslab {
namespace {

using ::rsslab::v1::Header;
using ::rsslab::v1::Scenario;

std::string Deterministic(const google::protobuf::Message& m) {
  std::string out;
  google::protobuf::io::StringOutputStream so(&out);
  google::protobuf::io::CodedOutputStream cos(&so);
  cos.SetSerializationDeterministic(true);
  m.SerializeToCodedStream(&cos);
  cos.Trim();
  return out;
}

void Fnv(const std::string& bytes, uint64_t* h) {
  for (unsigned char c : bytes) {
    *h ^= c;
    *h *= 1099511628211ull;
  }
}

std::string Quoted(const google::protobuf::RepeatedPtrField<std::string>& v) {
  return absl::StrCat("[", absl::StrJoin(v, ","), "]");
}

template <typename T>
std::string Listed(const T& v) {
  return absl::StrCat("[", absl::StrJoin(v, ","), "]");
}

std::string JsonString(absl::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      absl::StrAppendFormat(&out, "\\u%04x", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string FirstLine(absl::string_view s) {
  return std::string(absl::StripTrailingAsciiWhitespace(s.substr(0, s.find('\n'))));
}

}  // namespace

std::string CellId(const std::string& profile, int threads, int repeat) {
  return absl::StrFormat("%s/t%d/r%d", profile, threads, repeat);
}

int CountCells(const rsslab::v1::Sweep& sweep) {
  const int64_t n = static_cast<int64_t>(std::max<uint32_t>(1, sweep.repeats())) *
                    sweep.threads_size() * sweep.profiles_size();
  return n > kMaxCells ? -1 : static_cast<int>(n);
}

std::vector<SweepCell> ExpandCells(const rsslab::v1::Sweep& sweep) {
  std::vector<SweepCell> cells;
  if (CountCells(sweep) < 0) return cells;
  const int repeats = std::max<int>(1, static_cast<int>(sweep.repeats()));
  for (int r = 1; r <= repeats; ++r) {
    for (int threads : sweep.threads()) {
      for (const std::string& profile : sweep.profiles()) {
        SweepCell c;
        c.index = static_cast<int>(cells.size());
        c.profile = profile;
        c.threads = threads;
        c.repeat = r;
        c.id = CellId(profile, threads, r);
        cells.push_back(std::move(c));
      }
    }
  }
  return cells;
}

absl::StatusOr<std::vector<int>> ParseCellSelection(const std::string& spec, int total) {
  if (spec.size() > 4096) {
    return absl::InvalidArgumentError("--cells: longer than 4096 characters");
  }
  std::vector<int> out;
  auto index = [&](absl::string_view t, int* v) -> absl::Status {
    t = absl::StripAsciiWhitespace(t);
    if (!absl::SimpleAtoi(t, v) || *v < 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("--cells=%s: \"%s\" is not a cell index (0, 1, ...)", spec, t));
    }
    if (*v >= total) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--cells=%s: cell %d is out of range: the matrix has %d cells, 0..%d (see "
          "--print_cells)",
          spec, *v, total, total - 1));
    }
    return absl::OkStatus();
  };
  for (absl::string_view part : absl::StrSplit(spec, ',')) {
    if (absl::StripAsciiWhitespace(part).empty()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("--cells=%s: an empty entry (use e.g. 3,7-9)", spec));
    }
    std::vector<absl::string_view> ends = absl::StrSplit(part, absl::MaxSplits('-', 1));
    int lo = 0;
    if (absl::Status s = index(ends[0], &lo); !s.ok()) return s;
    int hi = lo;
    if (ends.size() == 2) {
      if (absl::Status s = index(ends[1], &hi); !s.ok()) return s;
      if (hi < lo) {
        return absl::InvalidArgumentError(
            absl::StrFormat("--cells=%s: the range %d-%d runs backwards", spec, lo, hi));
      }
    }
    for (int i = lo; i <= hi; ++i) out.push_back(i);
    // Bounded by `total` after dedup; dedup now so "0-9,0-9,..." stays small.
    if (out.size() > static_cast<size_t>(2 * total)) {
      std::sort(out.begin(), out.end());
      out.erase(std::unique(out.begin(), out.end()), out.end());
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string FormatCellSelection(const std::vector<int>& indices) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < indices.size();) {
    size_t j = i;
    while (j + 1 < indices.size() && indices[j + 1] == indices[j] + 1) ++j;
    parts.push_back(j == i ? absl::StrCat(indices[i])
                           : absl::StrCat(indices[i], "-", indices[j]));
    i = j + 1;
  }
  return absl::StrJoin(parts, ",");
}

std::string MatrixId(const Scenario& scenario, const rsslab::v1::LoadSpec& flags) {
  Scenario s = scenario;
  s.clear_description();  // words, not what runs
  uint64_t h = 14695981039346656037ull;
  Fnv(Deterministic(s), &h);
  Fnv("\n--flags--\n", &h);
  Fnv(Deterministic(flags), &h);
  return absl::StrFormat("%016x", h);
}

std::string MatrixDifference(const Header& a, const Header& b) {
  const auto& sa = a.scenario().sweep();
  const auto& sb = b.scenario().sweep();
  if (!a.scenario().has_sweep() || !b.scenario().has_sweep()) {
    return "one of them is not a sweep";
  }
  if (!std::equal(sa.profiles().begin(), sa.profiles().end(), sb.profiles().begin(),
                  sb.profiles().end())) {
    return absl::StrFormat("the profiles differ: %s vs %s", Quoted(sa.profiles()),
                           Quoted(sb.profiles()));
  }
  if (!std::equal(sa.threads().begin(), sa.threads().end(), sb.threads().begin(),
                  sb.threads().end())) {
    return absl::StrFormat("the thread counts differ: %s vs %s", Listed(sa.threads()),
                           Listed(sb.threads()));
  }
  if (std::max<uint32_t>(1, sa.repeats()) != std::max<uint32_t>(1, sb.repeats())) {
    return absl::StrFormat("the repeats differ: %d vs %d", std::max<uint32_t>(1, sa.repeats()),
                           std::max<uint32_t>(1, sb.repeats()));
  }
  if (sa.handler() != sb.handler()) {
    return absl::StrFormat("the handler differs: \"%s\" vs \"%s\"", sa.handler(), sb.handler());
  }
  if (!google::protobuf::util::MessageDifferencer::Equals(sa, sb)) {
    return "the server flags of the sweep block differ";
  }
  {
    Scenario x = a.scenario();
    Scenario y = b.scenario();
    for (Scenario* s : {&x, &y}) {
      s->clear_description();
      s->clear_sweep();
    }
    google::protobuf::util::MessageDifferencer d;
    std::string diff;
    d.ReportDifferencesToString(&diff);
    if (!d.Compare(x, y)) {
      return absl::StrFormat("the steps or scenario settings differ (%s)", FirstLine(diff));
    }
  }
  google::protobuf::util::MessageDifferencer fd;
  std::string fdiff;
  fd.ReportDifferencesToString(&fdiff);
  if (!fd.Compare(a.flags(), b.flags())) {
    return absl::StrFormat("the load flags differ (%s)", FirstLine(fdiff));
  }
  return "";
}

std::string CellsText(const std::vector<SweepCell>& cells) {
  std::string out = "index  profile             threads  repeat  cell\n";
  for (const SweepCell& c : cells) {
    absl::StrAppendFormat(&out, "%5d  %-18s  %7d  %6d  %s\n", c.index, c.profile, c.threads,
                          c.repeat, c.id);
  }
  return out;
}

std::string CellsJson(const std::vector<SweepCell>& cells, const std::string& matrix_id) {
  std::string out = absl::StrFormat("{\"matrix_id\":\"%s\",\"cells_total\":%d,\"cells\":[",
                                    matrix_id, cells.size());
  for (const SweepCell& c : cells) {
    absl::StrAppendFormat(&out,
                          "%s\n{\"index\":%d,\"profile\":%s,\"threads\":%d,\"repeat\":%d,"
                          "\"cell\":%s}",
                          c.index == 0 ? "" : ",", c.index, JsonString(c.profile), c.threads,
                          c.repeat, JsonString(c.id));
  }
  out += "\n]}\n";
  return out;
}

}  // namespace rsslab
