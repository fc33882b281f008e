// Thread counts from a snapshot's census, split into gRPC's own threads and
// the rest (workers, Python's, the handler's). gRPC 1.51 grows and shrinks
// its executor pools with load on its own schedule, so a test that asks
// "did we leak a thread?" counts the rest exactly and gRPC's loosely.
//
//   rsslab::v1::Snapshot s = ...;
//   int ours = rsslab::testing::NonGrpcThreads(s);
#ifndef RSSLAB_TESTS_THREAD_CENSUS_H_
#define RSSLAB_TESTS_THREAD_CENSUS_H_

#include "proto/snapshot.pb.h"

namespace rsslab {
namespace testing {

// Threads whose comm is one of gRPC's (event_engine, default-executo,
// grpcpp_sync_ser, nexting_thread, timer_manager, ...).
int GrpcThreads(const rsslab::v1::Snapshot& s);
// status().threads() minus GrpcThreads().
int NonGrpcThreads(const rsslab::v1::Snapshot& s);

}  // namespace testing
}  // namespace rsslab

#endif  // RSSLAB_TESTS_THREAD_CENSUS_H_
