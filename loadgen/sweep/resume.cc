#include "loadgen/sweep/resume.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/util/message_differencer.h"

namespace rsslab {
namespace {

using ::rsslab::v1::Event;
using ::rsslab::v1::Scenario;

std::string FirstLine(absl::string_view s) {
  return std::string(s.substr(0, s.find('\n')));
}

}  // namespace

std::set<std::string> SuccessfulCells(const std::vector<Event>& events) {
  std::set<std::string> done;
  for (const Event& e : events) {
    if (e.has_cell_result() && e.cell_result().ok() && !e.cell().empty()) done.insert(e.cell());
  }
  return done;
}

absl::Status CheckResumable(const Event& header, const Scenario& now,
                            const rsslab::v1::LoadSpec& flags_now) {
  if (!header.has_header() || (!header.header().scenario().has_sweep() &&
                                !header.header().scenario().has_soak())) {
    return absl::FailedPreconditionError(
        "its events.jsonl does not start with a sweep's or a soak's header record: only those "
        "can be resumed");
  }
  if (header.header().scenario().has_soak() != now.has_soak()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "the interrupted run is %s, this command is %s",
        header.header().scenario().has_soak() ? "a soak" : "a sweep",
        now.has_soak() ? "a soak" : "a sweep"));
  }
  const Scenario& was = header.header().scenario();
  if (!google::protobuf::util::MessageDifferencer::Equals(was.sweep(), now.sweep())) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "the sweep matrix differs from the interrupted run's: it ran { %s }, this command asks "
        "for { %s }; resume with the same --profiles, --threads_list, --repeats and scenario",
        was.sweep().ShortDebugString(), now.sweep().ShortDebugString()));
  }
  google::protobuf::util::MessageDifferencer d;
  std::string diff;
  d.ReportDifferencesToString(&diff);
  if (!d.Compare(was, now)) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "the steps or load flags differ from the interrupted run's (%s); resume with the "
        "command line that started it (its header's argv: %s)",
        FirstLine(diff), absl::StrJoin(header.header().argv(), " ")));
  }
  // Flags were recorded from this loadgen on; an older header has none.
  if (header.header().has_flags()) {
    google::protobuf::util::MessageDifferencer fd;
    std::string fdiff;
    fd.ReportDifferencesToString(&fdiff);
    if (!fd.Compare(header.header().flags(), flags_now)) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "the load flags differ from the interrupted run's (%s); resume with the command line "
          "that started it (its header's argv: %s)",
          FirstLine(fdiff), absl::StrJoin(header.header().argv(), " ")));
    }
  }
  return absl::OkStatus();
}

SoakResume SoakResumePoint(const std::vector<Event>& events) {
  SoakResume r;
  bool in_cycles = false;
  int last = 0;
  for (const Event& e : events) {
    if (e.has_header()) r.started = absl::FromUnixNanos(e.header().start_unix_nanos());
    // Records inside the repeat carry the loadgen phase; cycle 0 is the
    // proto default, so the phase is what says a cycle began.
    if (!e.loadgen_phase().empty()) {
      in_cycles = true;
      last = std::max(last, e.cycle());
    }
  }
  r.first_cycle = in_cycles ? last + 1 : 0;
  return r;
}

}  // namespace rsslab
