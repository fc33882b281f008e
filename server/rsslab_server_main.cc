// rsslab_server: a threaded gRPC server hosting an embedded CPython handler
// and a shared byte-bounded LRU cache, reporting where its memory is.
//
//   rsslab_server --threads=16 --listen=127.0.0.1:0 --control_listen=127.0.0.1:0
//
// Prints exactly one line on stdout when ready:
//   rsslab_server ready data=HOST:PORT control=HOST:PORT pid=PID
// followed by " metrics=HOST:PORT" when --metrics_listen is given. The flags
// and everything after them are server/run_server.h's.

#include "absl/flags/usage.h"
#include "server/run_server.h"

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "rsslab_server: threaded gRPC server with an embedded CPython handler and a\n"
      "shared LRU cache; reports RSS, arenas and allocator stats over its Control service.\n"
      "Prints 'rsslab_server ready data=HOST:PORT control=HOST:PORT pid=PID' when ready.");
  return rsslab::RunServer(argc, argv);
}
