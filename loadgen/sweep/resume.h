// --resume: what an interrupted sweep or soak left in its run directory,
// and whether this command line may continue it.
//
//   auto before = rsslab::ReadEvents(out, &unreadable);
//   if (auto s = rsslab::CheckResumable(before->front(), scenario, flags); !s.ok()) ...
//   std::set<std::string> keep = rsslab::SuccessfulCells(*before);   // sweep
//   rsslab::SoakResume at = rsslab::SoakResumePoint(*before);        // soak
#ifndef RSSLAB_LOADGEN_SWEEP_RESUME_H_
#define RSSLAB_LOADGEN_SWEEP_RESUME_H_

#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "proto/results.pb.h"
#include "proto/scenario.pb.h"

namespace rsslab {

// Cell ids with a successful cell_result among `events` (what --resume
// keeps).
std::set<std::string> SuccessfulCells(const std::vector<rsslab::v1::Event>& events);

// Where a resumed soak picks up: the cycle after the last one any record
// belongs to (an interrupted cycle is not finished: its records stay, the
// next number starts afresh), and when the interrupted run started (its
// --duration counts from there).
struct SoakResume {
  int first_cycle = 0;
  absl::Time started = absl::InfinitePast();
};
SoakResume SoakResumePoint(const std::vector<rsslab::v1::Event>& events);

// Why an interrupted run's header (a sweep's or a soak's) cannot be resumed
// with `now` (the scenario after overrides) and `flags_now` (the load
// flags): the matrix, the steps or the flags differ. OK when they match.
absl::Status CheckResumable(const rsslab::v1::Event& header, const rsslab::v1::Scenario& now,
                            const rsslab::v1::LoadSpec& flags_now);

}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_SWEEP_RESUME_H_
