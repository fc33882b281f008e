#include "tests/thread_census.h"

#include <string>

namespace rsslab {
namespace testing {
namespace {

// comm is cut at 15 bytes, so these are prefixes of gRPC 1.51's names.
bool IsGrpcThread(const std::string& comm) {
  static const char* const kPrefixes[] = {
      "default-executo", "event_engine",    "grpc_global_tim", "grpcpp_sync_ser",
      "nexting_thread",  "resolver-execut", "timer_manager",   "global-executor",
  };
  for (const char* p : kPrefixes) {
    if (comm.rfind(p, 0) == 0) return true;
  }
  return false;
}

}  // namespace

int GrpcThreads(const rsslab::v1::Snapshot& s) {
  int n = 0;
  for (const auto& t : s.thread_names()) {
    if (IsGrpcThread(t.comm())) n += t.count();
  }
  return n;
}

int NonGrpcThreads(const rsslab::v1::Snapshot& s) {
  return s.status().threads() - GrpcThreads(s);
}

}  // namespace testing
}  // namespace rsslab
