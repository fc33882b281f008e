#include "common/procfs/threads.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/procfs/internal/parse.h"

namespace rsslab {
namespace procfs {

using internal::NextToken;
using internal::ProcPathInto;

namespace {

// Reads task/TID/<file> relative to the open task directory into buf
// (NUL-free view, trailing newline dropped). False if the thread is gone.
bool ReadTaskFile(int dfd, const char* tid, const char* file, char* buf, size_t size,
                  absl::string_view* out) {
  char rel[64];
  snprintf(rel, sizeof(rel), "%s/%s", tid, file);
  int fd = openat(dfd, rel, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t got;
  do {
    got = read(fd, buf, size);
  } while (got < 0 && errno == EINTR);
  close(fd);
  if (got <= 0) return false;
  absl::string_view v(buf, static_cast<size_t>(got));
  absl::ConsumeSuffix(&v, "\n");
  *out = v;
  return true;
}

}  // namespace

bool ParseThreadStat(absl::string_view line, ThreadView* out) {
  size_t open = line.find(" (");
  size_t close = line.rfind(')');
  if (open == absl::string_view::npos || close == absl::string_view::npos || close < open) {
    return false;
  }
  int tid = 0;
  if (!absl::SimpleAtoi(line.substr(0, open), &tid)) return false;
  absl::string_view rest = line.substr(close + 1);
  // Fields after the comm, numbered as in proc(5): 3 = state ... 22 = starttime.
  absl::string_view state = NextToken(&rest);
  if (state.size() != 1) return false;
  uint32_t flags = 0;
  uint64_t start = 0;
  int ppid = 0;
  uint64_t minflt = 0;
  for (int field = 4; field <= 22; ++field) {
    absl::string_view tok = NextToken(&rest);
    if (tok.empty()) return false;
    if (field == 4 && !absl::SimpleAtoi(tok, &ppid)) return false;
    if (field == 10 && !absl::SimpleAtoi(tok, &minflt)) return false;
    if (field == 9 && !absl::SimpleAtoi(tok, &flags)) return false;
    if (field == 22 && !absl::SimpleAtoi(tok, &start)) return false;
  }
  out->tid = tid;
  out->comm = line.substr(open + 2, close - open - 2);
  out->state = state[0];
  out->flags = flags;
  out->start_ticks = start;
  out->ppid = ppid;
  out->minflt = minflt;
  return true;
}

absl::Status ForEachThread(int pid, int fields,
                           absl::FunctionRef<void(const ThreadView&)> fn, ThreadScan* scan,
                           int max_threads) {
  // getdents64 into a stack buffer and openat() relative to the directory:
  // opendir would malloc a 32 KiB buffer, and path strings more. The
  // server's census runs this inside the process it measures.
  char dir[64];
  ProcPathInto(pid, "task", dir, sizeof(dir));
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("open ", dir));
  }
  ThreadScan local;
  ThreadScan& sc = scan != nullptr ? *scan : local;
  sc = ThreadScan();
  alignas(8) char buf[4096];
  char comm_buf[64];
  char stat_buf[1024];  // a stat line is ~350 bytes; its comm at most 64
  char wchan_buf[128];
  int delivered = 0;
  while (!sc.truncated) {
    long n = syscall(SYS_getdents64, dfd, buf, sizeof(buf));  // NOLINT(runtime/int)
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (long off = 0; off < n;) {  // NOLINT(runtime/int)
      // struct linux_dirent64: d_ino(8) d_off(8) d_reclen(2) d_type(1) d_name
      unsigned short reclen;  // NOLINT(runtime/int)
      memcpy(&reclen, buf + off + 16, sizeof(reclen));
      const char* name = buf + off + 19;
      off += reclen;
      if (name[0] == '.') continue;
      if (delivered >= max_threads) {
        sc.truncated = true;
        break;
      }
      ++sc.listed;
      ThreadView t;
      if (!absl::SimpleAtoi(name, &t.tid)) continue;
      bool ok = true;
      if (fields & kThreadStat) {
        absl::string_view line;
        ok = ReadTaskFile(dfd, name, "stat", stat_buf, sizeof(stat_buf), &line) &&
             ParseThreadStat(line, &t);
      } else if (fields & kThreadComm) {
        ok = ReadTaskFile(dfd, name, "comm", comm_buf, sizeof(comm_buf), &t.comm);
      }
      if (ok && (fields & kThreadWchan)) {
        ok = ReadTaskFile(dfd, name, "wchan", wchan_buf, sizeof(wchan_buf), &t.wchan);
      }
      if (!ok) {
        ++sc.vanished;  // the thread exited meanwhile
        continue;
      }
      ++delivered;
      fn(t);
    }
  }
  close(dfd);
  return absl::OkStatus();
}

absl::Status ThreadCensus(
    int pid, google::protobuf::RepeatedPtrField<rsslab::v1::ThreadName>* out) {
  // Distinct comm names are few (15 in a 64-worker server: workers are
  // counted per name); a comm is at most 15 bytes, inside std::string's
  // small buffer, so each name costs one map node.
  std::map<std::string, int32_t> counts;
  absl::Status s = ForEachThread(pid, kThreadComm, [&](const ThreadView& t) {
    ++counts[std::string(t.comm)];
  });
  if (!s.ok()) return s;
  std::vector<std::pair<std::string, int32_t>> sorted(counts.begin(),
                                                      counts.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  out->Clear();
  for (auto& [name, count] : sorted) {
    rsslab::v1::ThreadName* t = out->Add();
    t->set_comm(name);
    t->set_count(count);
  }
  return absl::OkStatus();
}

}  // namespace procfs
}  // namespace rsslab
