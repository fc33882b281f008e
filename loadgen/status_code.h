// gRPC status code names, shared by the engine's summaries and the
// loadgen's Prometheus labels, and the bound on the replies the loadgen
// accepts (--max_receive_mb) with the error text that names it.
//
//   StatusCodeName(14)  // "UNAVAILABLE"
//   CallErrorText(8, "Received message larger than max (3145728 vs. 2097152)", 2)
//   // "RESOURCE_EXHAUSTED: Received message larger than max (3145728 vs. 2097152):
//   //  a reply over --max_receive_mb=2 (raise it to accept larger replies)"

#ifndef RSSLAB_LOADGEN_STATUS_CODE_H_
#define RSSLAB_LOADGEN_STATUS_CODE_H_

#include <string>

#include "absl/strings/string_view.h"

namespace rsslab {

// grpc::StatusCode OK..UNAUTHENTICATED.
inline constexpr int kStatusCodes = 17;

// "OK", "UNAVAILABLE", ... for a grpc::StatusCode value; "CODE_<n>" past
// the known ones.
std::string StatusCodeName(int code);

// The largest reply message (unary or one stream message) the loadgen takes
// on any channel it opens, in MiB (--max_receive_mb): a larger one is
// dropped instead of parsed and kept (gRPC 1.51 checks it once the reply is
// whole). The server's own bound (--max_message_mb) is 16 by default, at
// most 1024, so 64 leaves room for a raised one.
inline constexpr int kDefaultMaxReceiveMb = 64;
inline constexpr int kMaxReceiveMbLimit = 2047;  // gRPC's bound is an int of bytes

// The bound in bytes, for grpc::ChannelArguments::SetMaxReceiveMessageSize.
inline int MaxReceiveBytes(int max_receive_mb) { return max_receive_mb * (1 << 20); }

// The memory all the loadgen's channels together may hold in gRPC (read
// buffers, replies being assembled, call arenas), in MiB: 2 x
// --max_receive_mb, so that a reply at the bound fits beside the other
// calls, and at least 64 (1000 replies of 64 KiB in flight take 62.5).
// Past it gRPC cancels calls (receive_bound.h).
inline constexpr int kMinReceiveQuotaMb = 64;
inline int ReceiveQuotaMb(int max_receive_mb) {
  return 2 * max_receive_mb > kMinReceiveQuotaMb ? 2 * max_receive_mb : kMinReceiveQuotaMb;
}

// "CODE: message" of a failed call; a reply over the bound (gRPC's "Received
// message larger than max (N vs. M)") also names --max_receive_mb, and so
// does a call the memory quota cancelled ("Buffers full").
std::string CallErrorText(int code, absl::string_view message, int max_receive_mb);

}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_STATUS_CODE_H_
