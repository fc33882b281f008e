// The event loop both Asio engines (h1_worker.h, h2_worker.h) run on one
// thread: an io_context, the requests taken and waiting for a connection,
// the closed loop's refill or the open loop's schedule, --stop, deadlines
// checked every 10 ms, and the end of the step. An engine supplies how
// requests reach connections.
//
//   class MyWorker : public WorkerLoop {
//     void Dispatch() override;            // pending() onto free connections
//     void CheckDeadlines(int64_t now) override;
//     void CloseAll() override;
//   };
//   MyWorker w(st, args, stop, sends);
//   w.Run();   // returns when the step's requests are done
#ifndef RSSLAB_LOADGEN_HTTP_WORKER_LOOP_H_
#define RSSLAB_LOADGEN_HTTP_WORKER_LOOP_H_

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "loadgen/engine.h"
#include "loadgen/http/http_run.h"
#include "loadgen/http/http_target.h"

namespace rsslab {
namespace http {

// The server accepts connections (retried until `timeout`, as gRPC's
// WaitForConnected waits for a server still starting).
absl::Status WaitConnectable(const Target& t, absl::Duration timeout);

class WorkerLoop {
 public:
  WorkerLoop(RunState* st, const WorkerArgs& a, const StopFlag* stop, Sends* sends);
  virtual ~WorkerLoop() = default;
  void Run();

 protected:
  // Requests waiting in pending() onto connections that can take them.
  virtual void Dispatch() = 0;
  // Requests past their deadline (now, MonoNs) are failed as TIMEOUT.
  virtual void CheckDeadlines(int64_t now) = 0;
  // The step is over: close every connection.
  virtual void CloseAll() = 0;

  // A request finished at `end`: the next one in (closed loop) or what is
  // due (open loop), then Dispatch().
  void Finished(int64_t end);
  PendingRing& pending() { return pending_; }
  // A request's deadline when it leaves at `intended` (closed loop) or now.
  int64_t Deadline(int64_t intended) const;

  RunState* const st_;
  const WorkerArgs a_;
  boost::asio::io_context io_{BOOST_ASIO_CONCURRENCY_HINT_UNSAFE_IO};

 private:
  bool Issue(int64_t intended);
  void Tick();
  void OnTick();
  void SendDue();
  void MaybeEnd();

  const StopFlag* stop_;
  Sends* sends_;
  const int64_t deadline_ns_;
  boost::asio::steady_timer tick_{io_};
  boost::asio::steady_timer send_timer_{io_};
  bool send_armed_ = false;
  PendingRing pending_;
  int active_ = 0;  // requests taken and not finished: queued or on a connection
  Schedule schedule_;
  bool ended_ = false;
};

}  // namespace http
}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_HTTP_WORKER_LOOP_H_
