// The flags of `rsslab_loadgen [run]`: the target, the scenario and its load,
// the run directory, progress and metrics. A sweep's own flags are in
// loadgen/sweep/sweep_flags.h, compare's in loadgen/results/compare_main.cc.
//
//   #include "loadgen/run/run_flags.h"
//   const std::string target = absl::GetFlag(FLAGS_target);
#ifndef RSSLAB_LOADGEN_RUN_FLAGS_H_
#define RSSLAB_LOADGEN_RUN_FLAGS_H_

#include <cstdint>
#include <string>

#include "absl/flags/declare.h"
#include "absl/time/time.h"

ABSL_DECLARE_FLAG(std::string, target);
ABSL_DECLARE_FLAG(std::string, control);
ABSL_DECLARE_FLAG(std::string, scenario);
ABSL_DECLARE_FLAG(std::string, builtin);
ABSL_DECLARE_FLAG(std::string, print_builtin);
ABSL_DECLARE_FLAG(double, scale);
ABSL_DECLARE_FLAG(std::string, out);
ABSL_DECLARE_FLAG(uint32_t, concurrency);
ABSL_DECLARE_FLAG(uint32_t, channels);
ABSL_DECLARE_FLAG(double, rate);
ABSL_DECLARE_FLAG(std::string, arrival);
ABSL_DECLARE_FLAG(uint32_t, max_outstanding);
ABSL_DECLARE_FLAG(uint64_t, requests);
ABSL_DECLARE_FLAG(absl::Duration, duration);
ABSL_DECLARE_FLAG(absl::Duration, wait);
ABSL_DECLARE_FLAG(absl::Duration, warmup);
ABSL_DECLARE_FLAG(uint64_t, warmup_requests);
ABSL_DECLARE_FLAG(uint32_t, deadline_ms);
ABSL_DECLARE_FLAG(uint64_t, seed);
ABSL_DECLARE_FLAG(std::string, params);
ABSL_DECLARE_FLAG(uint32_t, payload_bytes);
ABSL_DECLARE_FLAG(bool, return_body);
ABSL_DECLARE_FLAG(uint64_t, max_errors);
ABSL_DECLARE_FLAG(std::string, client_api);
ABSL_DECLARE_FLAG(int, client_threads);
ABSL_DECLARE_FLAG(int, max_receive_mb);
ABSL_DECLARE_FLAG(absl::Duration, connect_timeout);
ABSL_DECLARE_FLAG(absl::Duration, control_timeout);
ABSL_DECLARE_FLAG(std::string, progress);
ABSL_DECLARE_FLAG(bool, fsync);
ABSL_DECLARE_FLAG(std::string, metrics_listen);
ABSL_DECLARE_FLAG(absl::Duration, metrics_hold);
ABSL_DECLARE_FLAG(bool, resume);

#endif  // RSSLAB_LOADGEN_RUN_FLAGS_H_
