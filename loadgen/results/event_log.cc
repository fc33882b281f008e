#include "loadgen/results/event_log.h"

#include "common/files.h"
#include "common/utf8_message.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio_ext.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "google/protobuf/util/json_util.h"

namespace rsslab {
namespace {

using ::rsslab::v1::Event;

}  // namespace

absl::StatusOr<std::unique_ptr<EventLog>> EventLog::Create(
    const std::string& dir, bool fsync) {
  if (absl::Status s = MakeDirs(dir); !s.ok()) return s;
  const std::string path = absl::StrCat(dir, "/events.jsonl");
  FILE* f = fopen(path.c_str(), "wx");  // x: never append to another run
  if (f == nullptr) {
    return absl::AlreadyExistsError(absl::StrFormat(
        "cannot create %s: %s (choose another --out)", path, strerror(errno)));
  }
  return std::unique_ptr<EventLog>(new EventLog(path, f, fsync));
}

absl::StatusOr<std::unique_ptr<EventLog>> EventLog::Reopen(
    const std::string& dir, bool fsync, uint64_t* torn_bytes) {
  const std::string path = absl::StrCat(dir, "/events.jsonl");
  int fd = open(path.c_str(), O_RDWR | O_APPEND | O_CLOEXEC);
  if (fd < 0) {
    return absl::NotFoundError(
        absl::StrFormat("cannot open %s: %s", path, strerror(errno)));
  }
  std::string text;
  char buf[1 << 16];
  ssize_t n;
  while ((n = pread(fd, buf, sizeof(buf), static_cast<off_t>(text.size()))) > 0) {
    text.append(buf, n);
  }
  if (n < 0) {
    const int e = errno;
    close(fd);
    return absl::InternalError(absl::StrFormat("cannot read %s: %s", path, strerror(e)));
  }
  const size_t keep = text.empty() || text.back() == '\n' ? text.size()
                      : text.rfind('\n') == std::string::npos ? 0
                                                               : text.rfind('\n') + 1;
  *torn_bytes = text.size() - keep;
  if (keep < text.size()) {
    if (ftruncate(fd, static_cast<off_t>(keep)) != 0) {
      const int e = errno;
      close(fd);
      return absl::InternalError(
          absl::StrFormat("cannot cut the torn last line of %s: %s", path, strerror(e)));
    }
    text.resize(keep);
  }
  uint64_t last_seq = 0;
  google::protobuf::util::JsonParseOptions o;
  o.ignore_unknown_fields = true;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    Event e;
    if (google::protobuf::util::JsonStringToMessage(std::string(line), &e, o).ok()) {
      last_seq = std::max<uint64_t>(last_seq, e.seq());
    }
  }
  FILE* f = fdopen(fd, "a");
  if (f == nullptr) {
    const int e = errno;
    close(fd);
    return absl::InternalError(absl::StrFormat("cannot open %s: %s", path, strerror(e)));
  }
  auto log = std::unique_ptr<EventLog>(new EventLog(path, f, fsync));
  absl::MutexLock l(&log->mu_);
  log->seq_ = last_seq;
  log->good_size_ = static_cast<off_t>(keep);
  return log;
}

absl::Status CheckRunDirEmpty(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return absl::OkStatus();
    if (errno == ENOTDIR) {
      return absl::FailedPreconditionError(
          absl::StrFormat("--out=%s is a file, not a run directory", dir));
    }
    return absl::OkStatus();  // MakeDirs reports anything else
  }
  std::vector<std::string> names;
  while (dirent* e = readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  closedir(d);
  if (names.empty()) return absl::OkStatus();
  std::sort(names.begin(), names.end());
  if (names.size() > 4) {
    names.resize(4);
    names.push_back("...");
  }
  return absl::FailedPreconditionError(absl::StrFormat(
      "--out=%s already holds a run (%s); a run never writes over another: choose another "
      "--out, or add --resume to continue an interrupted sweep there",
      dir, absl::StrJoin(names, ", ")));
}

EventLog::~EventLog() {
  absl::MutexLock l(&mu_);
  if (file_ != nullptr) fclose(file_);
}

absl::Status EventLog::Append(Event event) {
  absl::MutexLock l(&mu_);
  event.set_seq(++seq_);  // 1-based: 0 would vanish from the JSON
  if (event.unix_nanos() == 0) event.set_unix_nanos(absl::ToUnixNanos(absl::Now()));
  const std::string line = EventToJson(event) + "\n";
  if (fwrite(line.data(), 1, line.size(), file_) != line.size() ||
      fflush(file_) != 0) {
    const int err = errno;
    // Drop the unwritten rest and cut off the partial record.
    __fpurge(file_);
    clearerr(file_);
    if (ftruncate(fileno(file_), good_size_) == 0) fseeko(file_, good_size_, SEEK_SET);
    --seq_;
    return absl::InternalError(
        absl::StrFormat("cannot write %s: %s", path_, strerror(err)));
  }
  good_size_ += static_cast<off_t>(line.size());
  if (fsync_) fsync(fileno(file_));
  return absl::OkStatus();
}

uint64_t EventLog::count() const {
  absl::MutexLock l(&mu_);
  return seq_;
}

std::string EventToJson(const Event& event) {
  google::protobuf::util::JsonPrintOptions o;
  o.preserve_proto_field_names = true;
  o.add_whitespace = false;
  std::string out;
  // A peer's text (an error, a thread name) may hold bytes that are not
  // UTF-8: escaped in a copy, so the line is valid JSON and protobuf logs
  // nothing. Printing a well-formed message cannot fail.
  Event copy = event;
  ReplaceInvalidUtf8(&copy);
  (void)google::protobuf::util::MessageToJsonString(copy, &out, o);
  return out;
}

absl::StatusOr<std::vector<Event>> ReadEvents(const std::string& dir,
                                              int* skipped) {
  const std::string path = absl::StrCat(dir, "/events.jsonl");
  // `report DIR` and --resume read a file a user points at: a FIFO would
  // block the open and /dev/zero (no newline) would grow one line forever.
  if (absl::Status s = CheckRegularFile(path, kEventsFileMaxBytes, "events file"); !s.ok()) {
    if (absl::IsNotFound(s)) return absl::NotFoundError(absl::StrCat("cannot read ", path));
    return s;
  }
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::vector<Event> events;
  std::string line;
  int bad = 0;
  google::protobuf::util::JsonParseOptions o;
  o.ignore_unknown_fields = true;  // records from a newer loadgen
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    Event e;
    if (google::protobuf::util::JsonStringToMessage(line, &e, o).ok()) {
      events.push_back(std::move(e));
    } else {
      ++bad;
    }
  }
  if (skipped != nullptr) *skipped = bad;
  return events;
}

}  // namespace rsslab
