#include "common/protobuf_log.h"

#include <cstdio>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "google/protobuf/stubs/logging.h"

namespace rsslab {
namespace {

constexpr int kFullLines = 5;
constexpr absl::Duration kInterval = absl::Seconds(10);

absl::Mutex g_mu;
const char* g_program ABSL_GUARDED_BY(g_mu) = "rsslab";
int g_printed ABSL_GUARDED_BY(g_mu) = 0;
long g_dropped ABSL_GUARDED_BY(g_mu) = 0;
absl::Time g_last_summary ABSL_GUARDED_BY(g_mu) = absl::InfinitePast();

void Handler(google::protobuf::LogLevel level, const char* filename, int line,
             const std::string& message) {
  absl::MutexLock l(&g_mu);
  if (level == google::protobuf::LOGLEVEL_FATAL || g_printed < kFullLines) {
    ++g_printed;
    fprintf(stderr, "[libprotobuf %s:%d] %s\n", filename, line, message.c_str());
    if (g_printed == kFullLines) {
      fprintf(stderr, "%s: later protobuf messages are counted, one line per %s\n", g_program,
              absl::FormatDuration(kInterval).c_str());
    }
    return;
  }
  ++g_dropped;
  const absl::Time now = absl::Now();
  if (now - g_last_summary >= kInterval) {
    fprintf(stderr, "%s: %ld protobuf messages not printed (last: %s)\n", g_program, g_dropped,
            message.substr(0, 200).c_str());
    g_dropped = 0;
    g_last_summary = now;
  }
}

}  // namespace

void InstallRateLimitedProtobufLog(const char* program) {
  {
    absl::MutexLock l(&g_mu);
    g_program = program;
  }
  google::protobuf::SetLogHandler(&Handler);
}

}  // namespace rsslab
