// The bound on what a peer can make the loadgen hold: every channel the
// loadgen opens (the load channels, Control, rsslab_agent) takes it.
//
//   grpc::ChannelArguments args;
//   BoundReceive(&args, absl::GetFlag(FLAGS_max_receive_mb));
//   grpc::CreateCustomChannel(target, creds, args);

#ifndef RSSLAB_LOADGEN_RECEIVE_BOUND_H_
#define RSSLAB_LOADGEN_RECEIVE_BOUND_H_

#include <grpcpp/support/channel_arguments.h>

namespace rsslab {

// Sets the reply bound (--max_receive_mb: a larger reply fails its call with
// RESOURCE_EXHAUSTED) and the process's one gRPC resource quota of
// ReceiveQuotaMb(max_receive_mb) MiB on `args`.
void BoundReceive(grpc::ChannelArguments* args, int max_receive_mb);

}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_RECEIVE_BOUND_H_
