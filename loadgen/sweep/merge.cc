#include "loadgen/sweep/merge.h"

#include <dirent.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <set>
#include <cstdio>
#include <cstring>
#include <tuple>
#include <utility>

#include "absl/hash/hash.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/files.h"
#include "loadgen/results/cells.h"
#include "google/protobuf/util/json_util.h"
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
  // Where its records are in dir/events.jsonl (offset, length): merge holds
  // no records, only these, and reads one record at a time when it writes
  // (memory bounded by the largest record, not the sum of the inputs).
  std::vector<std::pair<int64_t, int64_t>> lines;
  int64_t last_ns = 0;
  // The records' bytes, hashed in order (Fingerprint).
  size_t bytes_hash = 0;
  bool has_result = false;
  std::string last_step;
  bool dir_finished = false;  // the run directory has a footer
  rsslab::v1::HostInfo host;  // its header's
};

std::string MatrixIdOf(const rsslab::v1::Header& h) {
  return h.matrix_id().empty() ? MatrixId(h.scenario(), h.flags()) : h.matrix_id();
}


// events.jsonl of one run directory, a record at a time. A line that does
// not parse (a torn last line) is counted and skipped, as ReadEvents does.
class EventReader {
 public:
  ~EventReader() {
    if (f_ != nullptr) fclose(f_);
    free(buf_);
  }
  absl::Status Open(const std::string& dir) {
    path_ = absl::StrCat(dir, "/events.jsonl");
    // A FIFO would block the open, /dev/zero would grow one line forever.
    if (absl::Status s = CheckRegularFile(path_, kEventsFileMaxBytes, "events file"); !s.ok()) {
      return absl::InvalidArgumentError(s.message());
    }
    f_ = fopen(path_.c_str(), "re");
    if (f_ == nullptr) return absl::InvalidArgumentError(absl::StrCat("cannot read ", path_));
    return absl::OkStatus();
  }
  // The next record and where its line is; false at the end.
  bool Next(Event* e, int64_t* offset, int64_t* len, absl::string_view* bytes) {
    google::protobuf::util::JsonParseOptions o;
    o.ignore_unknown_fields = true;  // records from a newer loadgen
    while (true) {
      const int64_t at = pos_;
      ssize_t n = getline(&buf_, &cap_, f_);
      if (n <= 0) return false;
      pos_ += n;
      absl::string_view line(buf_, n);
      if (absl::EndsWith(line, "\n")) line.remove_suffix(1);
      if (line.empty()) continue;
      e->Clear();
      if (!google::protobuf::util::JsonStringToMessage(std::string(line), e, o).ok()) {
        ++skipped_;
        continue;
      }
      *offset = at;
      *len = static_cast<int64_t>(line.size());
      *bytes = line;
      return true;
    }
  }
  int skipped() const { return skipped_; }

 private:
  std::string path_;
  FILE* f_ = nullptr;
  char* buf_ = nullptr;
  size_t cap_ = 0;
  int64_t pos_ = 0;
  int skipped_ = 0;
};

// One record read back by where EventReader found it.
absl::Status ReadRecordAt(FILE* f, const std::string& path, int64_t offset, int64_t len,
                          Event* e) {
  std::string line(static_cast<size_t>(len), '\0');
  if (fseeko(f, offset, SEEK_SET) != 0 || fread(line.data(), 1, line.size(), f) != line.size()) {
    return absl::InternalError(absl::StrCat("cannot read ", path, " again (changed meanwhile?)"));
  }
  google::protobuf::util::JsonParseOptions o;
  o.ignore_unknown_fields = true;
  e->Clear();
  if (!google::protobuf::util::JsonStringToMessage(line, e, o).ok()) {
    return absl::InternalError(absl::StrCat(path, " changed while merging"));
  }
  return absl::OkStatus();
}

// The merged events.jsonl, written a record at a time to a temporary file
// beside it, then fsync'ed and renamed over it (as WriteFileAtomically).
class MergedWriter {
 public:
  explicit MergedWriter(const std::string& out)
      : path_(absl::StrCat(out, "/events.jsonl")),
        tmp_(absl::StrCat(out, "/.events.jsonl.tmp-", getpid())) {}
  ~MergedWriter() {
    if (f_ != nullptr) {
      fclose(f_);
      unlink(tmp_.c_str());
    }
  }
  absl::Status Open() {
    f_ = fopen(tmp_.c_str(), "we");
    if (f_ == nullptr) return absl::InternalError(absl::StrCat("cannot write ", tmp_, ": ", strerror(errno)));
    return absl::OkStatus();
  }
  // Numbers it (seq), writes it and feeds the summary.
  void Write(Event& e) {
    e.set_seq(++count_);
    const std::string line = EventToJson(e) + "\n";
    if (fwrite(line.data(), 1, line.size(), f_) != line.size()) ok_ = false;
    summary_.Add(e);
  }
  uint64_t count() const { return count_; }
  const SweepSummaryBuilder& summary() const { return summary_; }
  absl::Status Commit() {
    const bool flushed = fflush(f_) == 0 && fsync(fileno(f_)) == 0;
    const bool closed = fclose(f_) == 0;
    f_ = nullptr;
    if (!ok_ || !flushed || !closed || rename(tmp_.c_str(), path_.c_str()) != 0) {
      const int err = errno;
      unlink(tmp_.c_str());
      return absl::InternalError(absl::StrCat("cannot write ", path_, ": ", strerror(err)));
    }
    return absl::OkStatus();
  }

 private:
  const std::string path_, tmp_;
  FILE* f_ = nullptr;
  bool ok_ = true;
  uint64_t count_ = 0;
  SweepSummaryBuilder summary_;
};

// --out may already hold an earlier merge (it is rebuilt), nothing else.
absl::Status CheckOut(const std::string& out) {
  if (!HasEvents(out)) return absl::OkStatus();
  // Its first record says whether it is a merge: nothing else is read.
  EventReader reader;
  Event first;
  int64_t offset = 0, len = 0;
  absl::string_view bytes;
  if (!reader.Open(out).ok() || !reader.Next(&first, &offset, &len, &bytes) ||
      !first.has_header() || first.header().merged_from_size() == 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--out=%s holds a run, not a merge: choose another --out", out));
  }
  return absl::OkStatus();
}

// What the inputs hold: the first run's header (the matrix) and every
// attempt at every cell.
struct Inputs {
  MergeOptions options;
  rsslab::v1::Header ref;
  std::string ref_dir;
  std::string ref_id;
  std::string ref_id_without_profiles;  // union_profiles: what must match
  std::vector<Segment> segments;
  // Fingerprints of the attempts kept (their cell and records, byte for
  // byte) -> the directory that had them first: a copy of a run directory,
  // or the same one reached twice, is recognised and counted once rather
  // than as extra re-queued attempts.
  std::map<std::string, std::string> fingerprints;
};

std::string Fingerprint(const Segment& s) {
  return absl::StrCat(s.cell, "|", s.lines.empty() ? s.start : 0, "|", s.lines.size(), "|",
                      s.bytes_hash);
}

// One run directory's records, split into attempts as they are read:
// (cell, attempt within the run, resume epoch) -> segment.
class SegmentSplitter {
 public:
  SegmentSplitter(const std::string& dir, const rsslab::v1::Header& h) : dir_(dir), h_(h) {}
  void Add(const Event& e, int64_t offset, int64_t len, absl::string_view bytes) {
    if (e.has_resumed()) {
      // Resumed in place (--resume, a --results_dir rerun): the records
      // after it are a later attempt's, and an earlier footer no longer
      // says the run is over.
      ++epoch_;
      finished_ = false;
    }
    if (e.has_footer()) finished_ = true;
    if (e.has_header() || e.has_footer() || e.has_resumed() || e.cell().empty()) return;
    auto key = std::make_tuple(e.cell(), std::max(1, e.attempt()), epoch_);
    auto it = at_.find(key);
    if (it == at_.end()) {
      Segment seg;
      seg.dir = dir_;
      seg.cell = e.cell();
      seg.start = e.has_cell_result() ? e.cell_result().start_unix_nanos() : e.unix_nanos();
      seg.host = h_.host();
      segments_.push_back(std::move(seg));
      it = at_.emplace(key, segments_.size() - 1).first;
    }
    Segment& seg = segments_[it->second];
    if (e.has_cell_result()) seg.has_result = true;
    if (e.has_step()) seg.last_step = e.step().step();
    seg.lines.emplace_back(offset, len);
    seg.last_ns = e.unix_nanos();
    seg.bytes_hash = absl::Hash<std::pair<size_t, absl::string_view>>()({seg.bytes_hash, bytes});
  }
  // The attempts, once every record is in.
  std::vector<Segment> Finish() {
    for (Segment& seg : segments_) seg.dir_finished = finished_;
    // A batch task's run (--cells) that stopped before its cell wrote a
    // record is an attempt too: it shows, failed, with why.
    if (finished_) return std::move(segments_);
    const std::vector<SweepCell> all = ExpandCells(h_.scenario().sweep());
    for (int i : h_.cells_selected()) {
      if (i < 0 || i >= static_cast<int>(all.size())) continue;
      const bool seen = std::any_of(at_.begin(), at_.end(), [&](const auto& kv) {
        return std::get<0>(kv.first) == all[i].id;
      });
      if (seen) continue;
      Segment seg;
      seg.dir = dir_;
      seg.cell = all[i].id;
      seg.start = h_.start_unix_nanos();
      seg.host = h_.host();
      segments_.push_back(std::move(seg));
    }
    return std::move(segments_);
  }

 private:
  const std::string dir_;
  const rsslab::v1::Header h_;
  std::map<std::tuple<std::string, int, int>, size_t> at_;
  std::vector<Segment> segments_;
  int epoch_ = 0;
  bool finished_ = false;
};

// The matrix id with the profile list left out: two runs that differ only
// in their profiles have the same.
std::string IdWithoutProfiles(const rsslab::v1::Header& h) {
  rsslab::v1::Scenario s = h.scenario();
  s.mutable_sweep()->clear_profiles();
  return MatrixId(s, h.flags());
}

// Whether h's matrix is the first input's, or (union_profiles) the same but
// for its profiles, which then join the merged matrix; else why not.
absl::Status AcceptMatrix(const std::string& dir, const rsslab::v1::Header& h, Inputs* in) {
  const std::string id = MatrixIdOf(h);
  if (in->ref_dir.empty()) {
    in->ref = h;
    in->ref_dir = dir;
    in->ref_id = id;
    in->ref_id_without_profiles = IdWithoutProfiles(h);
    return absl::OkStatus();
  }
  if (id == in->ref_id) return absl::OkStatus();
  if (in->options.union_profiles && IdWithoutProfiles(h) == in->ref_id_without_profiles) {
    auto* profiles = in->ref.mutable_scenario()->mutable_sweep()->mutable_profiles();
    for (const std::string& p : h.scenario().sweep().profiles()) {
      if (std::find(profiles->begin(), profiles->end(), p) == profiles->end()) *profiles->Add() = p;
    }
    in->ref.clear_matrix_id();
    in->ref_id = MatrixIdOf(in->ref);
    return absl::OkStatus();
  }
  std::string why = MatrixDifference(in->ref, h);
  if (why.empty()) why = "the matrix ids differ (records of another loadgen version?)";
  const bool only_profiles = IdWithoutProfiles(h) == in->ref_id_without_profiles;
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s ran another matrix than %s (matrix %s, not %s): %s%s", dir, in->ref_dir, id,
      in->ref_id, why,
      only_profiles && !in->options.union_profiles
          ? "; only the profiles differ: --union_profiles merges them into one matrix"
          : ""));
}

// Reads one run directory into `in`, a record at a time: a sweep of the
// same matrix as the first one, or refused naming what differs.
absl::Status ReadRunDir(const std::string& dir, Inputs* in, MergeResult* result) {
  EventReader reader;
  if (absl::Status s = reader.Open(dir); !s.ok()) return s;
  Event e;
  int64_t offset = 0, len = 0;
  absl::string_view bytes;
  if (!reader.Next(&e, &offset, &len, &bytes) || !e.has_header() ||
      !e.header().scenario().has_sweep()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s is not a sweep's run directory (its first record is not a sweep header)", dir));
  }
  const rsslab::v1::Header h = e.header();
  if (h.merged_from_size() > 0) {
    result->notes.push_back(absl::StrCat(dir, ": an earlier merge's output, skipped"));
    return absl::OkStatus();
  }
  if (absl::Status s = AcceptMatrix(dir, h, in); !s.ok()) return s;
  result->run_dirs.push_back(dir);
  SegmentSplitter split(dir, h);
  while (reader.Next(&e, &offset, &len, &bytes)) split.Add(e, offset, len, bytes);
  if (reader.skipped() > 0) {
    result->notes.push_back(
        absl::StrFormat("%s: skipped %d unreadable line(s)", dir, reader.skipped()));
  }
  int same = 0;
  std::string first;
  for (Segment& seg : split.Finish()) {
    auto [it, added] = in->fingerprints.emplace(Fingerprint(seg), dir);
    if (!added) {
      ++same;
      first = it->second;
      continue;
    }
    in->segments.push_back(std::move(seg));
  }
  if (same > 0) {
    result->notes.push_back(absl::StrFormat(
        "%s: %d attempt(s) hold the same records as %s (a copy, or the same run given twice); "
        "counted once",
        dir, same, first));
  }
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
  // An earlier merge found inside an input directory; a directory reached
  // twice (given twice, or also inside a parent given) is read once.
  std::vector<std::string> unique;
  std::set<std::string> seen;
  for (const std::string& d : dirs) {
    const std::string real = RealPath(d);
    if (real == out_real || !seen.insert(real).second) continue;
    unique.push_back(d);
  }
  return unique;
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
absl::Status AppendAttempts(std::vector<Segment>& segments, const std::vector<SweepCell>& matrix,
                            MergedWriter* merged, MergeResult* result) {
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
    const int64_t last_ns = s.lines.empty() ? s.start : s.last_ns;
    const bool began = !s.lines.empty();
    if (began) {
      const std::string path = absl::StrCat(s.dir, "/events.jsonl");
      FILE* f = fopen(path.c_str(), "re");
      if (f == nullptr) return absl::InternalError(absl::StrCat("cannot read ", path, " again"));
      Event e;
      for (const auto& [offset, len] : s.lines) {
        if (absl::Status r = ReadRecordAt(f, path, offset, len, &e); !r.ok()) {
          fclose(f);
          return r;
        }
        e.set_attempt(attempt);
        if (s.index >= 0) e.set_cell_index(s.index);
        merged->Write(e);
      }
      fclose(f);
    }
    if (!s.has_result) {
      ++result->unfinished_attempts;
      Event r = UnfinishedResult(s, s.index >= 0 ? &matrix[s.index] : nullptr, attempt, last_ns,
                                 began);
      merged->Write(r);
    }
  }
  return absl::OkStatus();
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
  return MergeRunDirs(inputs, out, MergeOptions(), result);
}

absl::Status MergeRunDirs(const std::vector<std::string>& inputs, const std::string& out,
                          const MergeOptions& options, MergeResult* result) {
  if (out.empty()) return absl::InvalidArgumentError("merge needs --out=DIR");
  if (inputs.empty()) return absl::InvalidArgumentError("merge needs run directories to merge");
  if (absl::Status s = CheckOut(out); !s.ok()) return s;
  absl::StatusOr<std::vector<std::string>> dirs = InputDirs(inputs, RealPath(out));
  if (!dirs.ok()) return dirs.status();
  Inputs in;
  in.options = options;
  for (const std::string& dir : *dirs) {
    if (absl::Status s = ReadRunDir(dir, &in, result); !s.ok()) return s;
  }
  if (result->run_dirs.empty()) {
    return absl::InvalidArgumentError("nothing to merge: every input was an earlier merge's output");
  }
  const std::vector<SweepCell> matrix = ExpandCells(in.ref.scenario().sweep());
  if (absl::Status s = MakeDirs(out); !s.ok()) return s;
  MergedWriter merged(out);
  if (absl::Status s = merged.Open(); !s.ok()) return s;
  Event header = MergedHeader(in, *result, static_cast<int>(matrix.size()));
  merged.Write(header);
  if (absl::Status s = AppendAttempts(in.segments, matrix, &merged, result); !s.ok()) return s;
  Event footer = MergedFooter(merged.summary().Summary(), merged.count() + 1);
  merged.Write(footer);
  result->summary = merged.summary().Summary();
  if (absl::Status s = merged.Commit(); !s.ok()) return s;
  return WriteSweepSummary(out, result->summary);
}

}  // namespace rsslab
