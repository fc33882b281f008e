#include "common/procfs/status.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "common/procfs/internal/parse.h"
#include "common/procfs/proc_file.h"

namespace rsslab {
namespace procfs {

using internal::NextLine;
using internal::ParseKb;

absl::Status ParseStatus(absl::string_view text, rsslab::v1::ProcStatus* out) {
  bool saw_rss = false;
  while (!text.empty()) {
    absl::string_view line = NextLine(&text);
    size_t colon = line.find(':');
    if (colon == absl::string_view::npos) continue;
    absl::string_view key = line.substr(0, colon);
    absl::string_view value = line.substr(colon + 1);
    int64_t v = 0;
    if (key == "Threads") {
      int32_t t = 0;
      if (absl::SimpleAtoi(absl::StripAsciiWhitespace(value), &t)) {
        out->set_threads(t);
      }
      continue;
    }
    if (!absl::StartsWith(key, "Vm") && !absl::StartsWith(key, "Rss")) continue;
    if (!ParseKb(value, &v)) continue;
    if (key == "VmRSS") {
      out->set_rss_bytes(v);
      saw_rss = true;
    } else if (key == "VmHWM") {
      out->set_hwm_bytes(v);
    } else if (key == "RssAnon") {
      out->set_anon_bytes(v);
    } else if (key == "RssFile") {
      out->set_file_bytes(v);
    } else if (key == "RssShmem") {
      out->set_shmem_bytes(v);
    } else if (key == "VmSize") {
      out->set_vm_size_bytes(v);
    } else if (key == "VmSwap") {
      out->set_swap_bytes(v);
    } else if (key == "VmData") {
      out->set_vm_data_bytes(v);
    }
  }
  if (!saw_rss) {
    return absl::InvalidArgumentError(
        "status has no VmRSS line (kernel thread, zombie, or not a "
        "/proc/PID/status file)");
  }
  return absl::OkStatus();
}

absl::Status ReadStatus(int pid, rsslab::v1::ProcStatus* out) {
  absl::StatusOr<MappedText> text = MappedText::Read(pid, "status");
  if (!text.ok()) return text.status();
  return ParseStatus(text->view(), out);
}

int CountCpuList(absl::string_view list) {
  list = absl::StripAsciiWhitespace(list);
  if (list.empty() || list.back() == ',') return -1;
  int total = 0;
  while (!list.empty()) {
    size_t comma = list.find(',');
    absl::string_view part = list.substr(0, comma);
    list.remove_prefix(comma == absl::string_view::npos ? list.size() : comma + 1);
    size_t dash = part.find('-');
    int lo = 0, hi = 0;
    if (dash == absl::string_view::npos) {
      if (!absl::SimpleAtoi(part, &lo)) return -1;
      hi = lo;
    } else if (!absl::SimpleAtoi(part.substr(0, dash), &lo) ||
               !absl::SimpleAtoi(part.substr(dash + 1), &hi)) {
      return -1;
    }
    if (lo < 0 || hi < lo || hi - lo > (1 << 20)) return -1;
    total += hi - lo + 1;
  }
  return total;
}

absl::string_view StatusField(absl::string_view text, absl::string_view key) {
  while (!text.empty()) {
    absl::string_view line = NextLine(&text);
    if (line.size() > key.size() && absl::StartsWith(line, key) && line[key.size()] == ':') {
      return absl::StripAsciiWhitespace(line.substr(key.size() + 1));
    }
  }
  return absl::string_view();
}

}  // namespace procfs
}  // namespace rsslab
