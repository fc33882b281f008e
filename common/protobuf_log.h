// protobuf's log lines, rate-limited. A peer can make protobuf log one line
// per request it sends (e.g. a string field that is not UTF-8: "String field
// ... contains invalid UTF-8 data"), so a process that parses peers' bytes
// must not pass every such line to stderr: the first few are printed, then
// at most one line per interval counting what was dropped.
//
//   InstallRateLimitedProtobufLog("rsslab_server");   // once, early in main

#ifndef RSSLAB_COMMON_PROTOBUF_LOG_H_
#define RSSLAB_COMMON_PROTOBUF_LOG_H_

namespace rsslab {

void InstallRateLimitedProtobufLog(const char* program);

}  // namespace rsslab

#endif  // RSSLAB_COMMON_PROTOBUF_LOG_H_
