// rsslab_bench_server: rsslab_server with one more flag, --dispatch, for
// bench/dispatch_cost.sh; never for serving. Every other flag, the ready
// line and the shutdown are rsslab_server's (server/run_server.h).
//
//   rsslab_bench_server --dispatch=pool --threads=4 --listen=127.0.0.1:0 --control_listen=127.0.0.1:0
//
// Snapshots report the mode in config.dispatch, and rsslab_ctl snapshot
// says when the handler is not called.

#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "bench/dispatch/bench_dispatch.h"
#include "server/run_server.h"

ABSL_FLAG(std::string, dispatch, "python",
          "python runs the handler (the product); pool answers on a worker without entering "
          "Python; inline answers on the thread that accepted the call, without the worker "
          "pool.");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "rsslab_bench_server: rsslab_server plus --dispatch=python|pool|inline, which splits\n"
      "a request's server CPU into gRPC, the worker hand-off and the GIL + Python call\n"
      "(bench/dispatch_cost.sh). Benchmarks only.");
  rsslab::ServerProgram program;
  program.configure = [](rsslab::ServerCore::Options* o) {
    return rsslab::UseBenchDispatch(absl::GetFlag(FLAGS_dispatch), o);
  };
  return rsslab::RunServer(argc, argv, program);
}
