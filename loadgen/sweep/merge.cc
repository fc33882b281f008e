#include "loadgen/sweep/merge.h"

#include <dirent.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/files.h"
#include "loadgen/results/cells.h"
#include "loadgen/results/event_log.h"

namespace rsslab {
namespace {

using ::rsslab::v1::Event;

// Bounds: a results directory of a very large sweep stays within these.
constexpr size_t kMaxRunDirs = 100000;

bool HasEvents(const std::string& dir) {
  return access(absl::StrCat(dir, "/events.jsonl").c_str(), R_OK) == 0;
}

std::string RealPath(const std::string& p) {
  char buf[PATH_MAX];
  return realpath(p.c_str(), buf) != nullptr ? std::string(buf) : p;
}

// A run directory, or the run directories directly inside a directory.
absl::Status ExpandInput(const std::string& arg, std::vector<std::string>* dirs) {
  if (HasEvents(arg)) {
    dirs->push_back(arg);
    return absl::OkStatus();
  }
  DIR* d = opendir(arg.c_str());
  if (d == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(arg, ": no such directory (give run directories or the directory holding them)"));
  }
  std::vector<std::string> found;
  while (dirent* e = readdir(d)) {
    const std::string n = e->d_name;
    if (n == "." || n == "..") continue;
    const std::string sub = absl::StrCat(arg, "/", n);
    if (HasEvents(sub)) found.push_back(sub);
    if (found.size() > kMaxRunDirs) break;
  }
  closedir(d);
  if (found.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        arg, " holds no run directory (no events.jsonl in it or in its subdirectories)"));
  }
  std::sort(found.begin(), found.end());
  dirs->insert(dirs->end(), found.begin(), found.end());
  return absl::OkStatus();
}

// One attempt at one cell, as one run directory recorded it.
struct Segment {
  std::string dir;
  std::string cell;
  int index = -1;
  int64_t start = 0;
  std::vector<Event> records;
  bool has_result = false;
  std::string last_step;
  bool dir_finished = false;  // the run directory has a footer
  rsslab::v1::HostInfo host;  // its header's
};

std::string MatrixIdOf(const rsslab::v1::Header& h) {
  return h.matrix_id().empty() ? MatrixId(h.scenario(), h.flags()) : h.matrix_id();
}

absl::Status MakeDirs(const std::string& dir) {
  for (size_t i = 1; i <= dir.size(); ++i) {
    if (i < dir.size() && dir[i] != '/') continue;
    const std::string p = dir.substr(0, i);
    if (mkdir(p.c_str(), 0755) != 0 && errno != EEXIST) {
      return absl::InternalError(absl::StrCat("cannot create ", p));
    }
  }
  return absl::OkStatus();
}

absl::Status WriteEvents(const std::string& out, const std::vector<Event>& events) {
  std::string text;
  for (const Event& e : events) absl::StrAppend(&text, EventToJson(e), "\n");
  return WriteFileAtomically(absl::StrCat(out, "/events.jsonl"), text);
}

// --out may already hold an earlier merge (it is rebuilt), nothing else.
absl::Status CheckOut(const std::string& out) {
  if (!HasEvents(out)) return absl::OkStatus();
  int skipped = 0;
  auto before = ReadEvents(out, &skipped);
  if (!before.ok() || before->empty() || !before->front().has_header() ||
      before->front().header().merged_from_size() == 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--out=%s holds a run, not a merge: choose another --out", out));
  }
  return absl::OkStatus();
}

// What the inputs hold: the first run's header (the matrix) and every
// attempt at every cell.
struct Inputs {
  rsslab::v1::Header ref;
  std::string ref_dir;
  std::string ref_id;
  std::vector<Segment> segments;
};

// One run directory's records, split into attempts: (cell, attempt within
// the run, resume epoch) -> segment.
void AddSegments(const std::string& dir, const rsslab::v1::Header& h, bool finished,
                 std::vector<Event>* events, std::vector<Segment>* segments) {
  std::map<std::tuple<std::string, int, int>, size_t> at;
  int epoch = 0;
  for (Event& e : *events) {
    if (e.has_resumed()) ++epoch;
    if (e.has_header() || e.has_footer() || e.has_resumed() || e.cell().empty()) continue;
    auto key = std::make_tuple(e.cell(), std::max(1, e.attempt()), epoch);
    auto it = at.find(key);
    if (it == at.end()) {
      Segment seg;
      seg.dir = dir;
      seg.cell = e.cell();
      seg.start = e.has_cell_result() ? e.cell_result().start_unix_nanos() : e.unix_nanos();
      seg.dir_finished = finished;
      seg.host = h.host();
      segments->push_back(std::move(seg));
      it = at.emplace(key, segments->size() - 1).first;
    }
    Segment& seg = (*segments)[it->second];
    if (e.has_cell_result()) seg.has_result = true;
    if (e.has_step()) seg.last_step = e.step().step();
    seg.records.push_back(std::move(e));
  }
  // A batch task's run (--cells) that stopped before its cell wrote a
  // record is an attempt too: it shows, failed, with why.
  if (finished) return;
  const std::vector<SweepCell> all = ExpandCells(h.scenario().sweep());
  for (int i : h.cells_selected()) {
    if (i < 0 || i >= static_cast<int>(all.size())) continue;
    const bool seen = std::any_of(at.begin(), at.end(), [&](const auto& kv) {
      return std::get<0>(kv.first) == all[i].id;
    });
    if (seen) continue;
    Segment seg;
    seg.dir = dir;
    seg.cell = all[i].id;
    seg.start = h.start_unix_nanos();
    seg.host = h.host();
    segments->push_back(std::move(seg));
  }
}

// Reads one run directory into `in`: a sweep of the same matrix as the
// first one, or refused naming what differs.
absl::Status ReadRunDir(const std::string& dir, Inputs* in, MergeResult* result) {
  int skipped = 0;
  absl::StatusOr<std::vector<Event>> events = ReadEvents(dir, &skipped);
  if (!events.ok()) return absl::InvalidArgumentError(events.status().message());
  if (skipped > 0) {
    result->notes.push_back(absl::StrFormat("%s: skipped %d unreadable line(s)", dir, skipped));
  }
  if (events->empty() || !events->front().has_header() ||
      !events->front().header().scenario().has_sweep()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s is not a sweep's run directory (its first record is not a sweep header)", dir));
  }
  const rsslab::v1::Header h = events->front().header();
  if (h.merged_from_size() > 0) {
    result->notes.push_back(absl::StrCat(dir, ": an earlier merge's output, skipped"));
    return absl::OkStatus();
  }
  const std::string id = MatrixIdOf(h);
  if (in->ref_dir.empty()) {
    in->ref = h;
    in->ref_dir = dir;
    in->ref_id = id;
  } else if (id != in->ref_id) {
    std::string why = MatrixDifference(in->ref, h);
    if (why.empty()) why = "the matrix ids differ (records of another loadgen version?)";
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s ran another matrix than %s (matrix %s, not %s): %s", dir, in->ref_dir, id,
        in->ref_id, why));
  }
  result->run_dirs.push_back(dir);
  const bool finished = std::any_of(events->begin(), events->end(),
                                    [](const Event& e) { return e.has_footer(); });
  AddSegments(dir, h, finished, &*events, &in->segments);
  return absl::OkStatus();
}

// The run directories the inputs name, --out excluded.
absl::StatusOr<std::vector<std::string>> InputDirs(const std::vector<std::string>& inputs,
                                                   const std::string& out_real) {
  std::vector<std::string> dirs;
  for (const std::string& in : inputs) {
    if (RealPath(in) == out_real) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s is the --out directory; merge writes there, give it elsewhere", in));
    }
    if (absl::Status s = ExpandInput(in, &dirs); !s.ok()) return s;
  }
  // An earlier merge found inside an input directory.
  dirs.erase(std::remove_if(dirs.begin(), dirs.end(),
                            [&](const std::string& d) { return RealPath(d) == out_real; }),
             dirs.end());
  return dirs;
}

Event MergedHeader(const Inputs& in, const MergeResult& result, int cells_total) {
  Event header;
  rsslab::v1::Header* h = header.mutable_header();
  *h = in.ref;
  h->clear_argv();
  h->clear_cells_selected();
  h->clear_agents();
  h->clear_host();
  h->set_local(false);
  h->set_matrix_id(in.ref_id);
  h->set_cells_total(cells_total);
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  h->set_hostname(host);
  h->set_agent(absl::StrFormat("merged from %d run director%s", result.run_dirs.size(),
                               result.run_dirs.size() == 1 ? "y" : "ies"));
  for (const std::string& d : result.run_dirs) h->add_merged_from(d);
  h->set_start_unix_nanos(absl::ToUnixNanos(absl::Now()));
  return header;
}

// The failed result an attempt without one gets: its records stay.
Event UnfinishedResult(const Segment& s, const SweepCell* cell, int attempt, int64_t last_ns,
                       bool began) {
  Event r;
  r.set_cell(s.cell);
  if (cell != nullptr) {
    r.set_profile(cell->profile);
    r.set_threads(cell->threads);
    r.set_repeat(cell->repeat);
    r.set_cell_index(cell->index);
  }
  r.set_attempt(attempt);
  r.set_unix_nanos(last_ns);
  r.set_label("merge");
  auto* cr = r.mutable_cell_result();
  cr->set_ok(false);
  cr->set_failed_at("unfinished");
  cr->set_start_unix_nanos(s.start);
  *cr->mutable_host() = s.host;
  cr->set_error(absl::StrFormat(
      "no result in %s: its records stop %s%s (the task was killed or its machine lost%s)", s.dir,
      !began                ? "before the cell began"
      : s.last_step.empty() ? "before the first step"
                            : "after step '",
      s.last_step.empty() ? "" : absl::StrCat(s.last_step, "'"),
      s.dir_finished ? "" : ", or it is still running"));
  return r;
}

// Cells in matrix order, attempts of a cell by start time, each numbered.
void AppendAttempts(std::vector<Segment>& segments, const std::vector<SweepCell>& matrix,
                    std::vector<Event>* merged, MergeResult* result) {
  std::map<std::string, int> index_of;
  for (const SweepCell& c : matrix) index_of[c.id] = c.index;
  for (Segment& s : segments) {
    auto it = index_of.find(s.cell);
    s.index = it == index_of.end() ? -1 : it->second;
  }
  std::stable_sort(segments.begin(), segments.end(), [](const Segment& a, const Segment& b) {
    // Cells not in the matrix (none with the same matrix id) last.
    const int ia = a.index < 0 ? INT_MAX : a.index;
    const int ib = b.index < 0 ? INT_MAX : b.index;
    return std::tie(ia, a.cell, a.start, a.dir) < std::tie(ib, b.cell, b.start, b.dir);
  });
  std::string prev_cell;
  int attempt = 0;
  for (Segment& s : segments) {
    attempt = s.cell == prev_cell ? attempt + 1 : 1;
    prev_cell = s.cell;
    ++result->attempts;
    const int64_t last_ns = s.records.empty() ? s.start : s.records.back().unix_nanos();
    const bool began = !s.records.empty();
    for (Event& e : s.records) {
      e.set_attempt(attempt);
      if (s.index >= 0) e.set_cell_index(s.index);
      merged->push_back(std::move(e));
    }
    if (!s.has_result) {
      ++result->unfinished_attempts;
      merged->push_back(UnfinishedResult(s, s.index >= 0 ? &matrix[s.index] : nullptr, attempt,
                                         last_ns, began));
    }
  }
}

Event MergedFooter(const SweepSummary& summary, uint64_t events) {
  Event footer;
  auto* f = footer.mutable_footer();
  f->set_completed(SweepComplete(summary));
  if (!f->completed()) {
    std::string why = IncompleteLine(summary);
    if (!summary.missing.empty()) {
      absl::StrAppend(&why, "; missing cells ", FormatCellSelection(summary.missing));
    }
    if (summary.failed_cells > 0) absl::StrAppend(&why, "; ", summary.failed_cells, " failed");
    f->set_error(why);
  }
  f->set_end_unix_nanos(absl::ToUnixNanos(absl::Now()));
  f->set_events(events);
  return footer;
}

}  // namespace

absl::Status MergeRunDirs(const std::vector<std::string>& inputs, const std::string& out,
                          MergeResult* result) {
  if (out.empty()) return absl::InvalidArgumentError("merge needs --out=DIR");
  if (inputs.empty()) return absl::InvalidArgumentError("merge needs run directories to merge");
  if (absl::Status s = CheckOut(out); !s.ok()) return s;
  absl::StatusOr<std::vector<std::string>> dirs = InputDirs(inputs, RealPath(out));
  if (!dirs.ok()) return dirs.status();
  Inputs in;
  for (const std::string& dir : *dirs) {
    if (absl::Status s = ReadRunDir(dir, &in, result); !s.ok()) return s;
  }
  if (result->run_dirs.empty()) {
    return absl::InvalidArgumentError("nothing to merge: every input was an earlier merge's output");
  }
  const std::vector<SweepCell> matrix = ExpandCells(in.ref.scenario().sweep());
  std::vector<Event> merged = {MergedHeader(in, *result, static_cast<int>(matrix.size()))};
  AppendAttempts(in.segments, matrix, &merged, result);
  merged.push_back(MergedFooter(BuildSweepSummary(merged), merged.size() + 1));
  for (size_t i = 0; i < merged.size(); ++i) merged[i].set_seq(i + 1);
  result->summary = BuildSweepSummary(merged);
  if (absl::Status s = MakeDirs(out); !s.ok()) return s;
  if (absl::Status s = WriteEvents(out, merged); !s.ok()) return s;
  return WriteSweepSummary(out, result->summary);
}

}  // namespace rsslab
