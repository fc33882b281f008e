// Records of a seed-like run for the event log and summary tests.
#ifndef RSSLAB_LOADGEN_RESULTS_RESULTS_TESTING_H_
#define RSSLAB_LOADGEN_RESULTS_RESULTS_TESTING_H_

#include <string>
#include <vector>

#include "proto/results.pb.h"

namespace rsslab {

// $TEST_TMPDIR/name (or /tmp/name).
std::string TmpDir(const std::string& name);

// A header, a fill load step, snapshots after fill and shrink and, when
// `complete`, after idle and trim; then the footer (completed or failed).
std::vector<rsslab::v1::Event> SeedLikeRun(bool complete);

}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_RESULTS_RESULTS_TESTING_H_
