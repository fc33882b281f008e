// What rsslab_server does from its command line to its exit: every server
// flag (ranges from common/server_flags), the Load and Control services,
// the metrics endpoint, the ready line, the drain on SIGTERM/SIGINT. The
// product's main is only this call; a second binary that is the same server
// with one change (the benchmark server, bench/dispatch/) passes its change
// as a hook instead of copying the rest.
//
//   int main(int argc, char** argv) {
//     absl::SetProgramUsageMessage("my_server: ...");
//     rsslab::ServerProgram program;
//     program.configure = [](rsslab::ServerCore::Options* o) {
//       o->dispatcher = MyDispatcherFactory();  // read your own flags here
//       return absl::OkStatus();
//     };
//     return rsslab::RunServer(argc, argv, program);
//   }
//
// Messages and the ready line are rsslab_server's whichever binary runs it
// ("rsslab_server ready data=HOST:PORT control=HOST:PORT pid=PID"), so
// scripts and tests wait for either the same way.

#ifndef RSSLAB_SERVER_RUN_SERVER_H_
#define RSSLAB_SERVER_RUN_SERVER_H_

#include <functional>

#include "absl/status/status.h"
#include "server/core.h"

namespace rsslab {

struct ServerProgram {
  // Called once the flags are parsed and every server flag is checked,
  // before the interpreter starts: may change the core's options (a
  // binary's own flags read here). An error is a usage error: its message
  // on stderr, exit 2.
  std::function<absl::Status(ServerCore::Options*)> configure;
};

// Parses the command line (absl flags; set the usage message first), serves
// until SIGTERM/SIGINT and returns the exit status: 0 after a clean drain;
// exits 2 itself on a bad flag, 1 when the environment fails (a port taken,
// a handler that does not import), 3 when a call outlives the grace period.
int RunServer(int argc, char** argv, const ServerProgram& program = {});

}  // namespace rsslab

#endif  // RSSLAB_SERVER_RUN_SERVER_H_
