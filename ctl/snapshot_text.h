// Human-readable renderings of snapshots and trims, for rsslab_ctl and logs.
//
// Example:
//   std::cout << SnapshotText(snapshot);
//   // phase fill  up 12.3s  served 96000 (in phase 96000)  errors 0
//   // rss 212.4 MiB  hwm 230.1 MiB  anon 200.0 MiB ...

#ifndef RSSLAB_CTL_SNAPSHOT_TEXT_H_
#define RSSLAB_CTL_SNAPSHOT_TEXT_H_

#include <cstdint>
#include <string>

#include "google/protobuf/message.h"
#include "proto/snapshot.pb.h"

namespace rsslab {

// "12.3 MiB" (binary units, one decimal).
std::string Mib(int64_t bytes);

std::string SnapshotText(const rsslab::v1::Snapshot& s);
std::string TrimText(const rsslab::v1::TrimResult& t);
// One line: time, phase, RSS, threads, arenas, cache — for `watch`.
std::string SnapshotLine(const rsslab::v1::Snapshot& s);

// Prints `m` as protobuf JSON (proto field names, defaults included) on one
// line of stdout, flushed: rsslab_ctl's --json. A peer's invalid UTF-8 is
// replaced, and what Echo escapes as \uNNNN is escaped in the JSON too.
void PrintJsonLine(const google::protobuf::Message& m);

}  // namespace rsslab

#endif  // RSSLAB_CTL_SNAPSHOT_TEXT_H_
