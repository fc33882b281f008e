#include "loadgen/http/worker_loop.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <limits>
#include <string>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace rsslab {
namespace http {
namespace {

using boost::system::error_code;

constexpr auto kTick = std::chrono::milliseconds(10);  // deadlines' and --stop's granularity

}  // namespace

absl::Status WaitConnectable(const Target& t, absl::Duration timeout) {
  namespace net = boost::asio;
  const absl::Time until = absl::Now() + timeout;
  std::string last;
  do {
    net::io_context io;
    net::ip::tcp::resolver resolver(io);
    error_code ec;
    const auto endpoints = resolver.resolve(t.host(), std::to_string(t.port()), ec);
    if (!ec) {
      net::ip::tcp::socket sock(io);
      net::connect(sock, endpoints, ec);
    }
    if (!ec) return absl::OkStatus();
    last = ec.message();
    absl::SleepFor(absl::Milliseconds(100));
  } while (absl::Now() < until);
  return absl::UnavailableError(absl::StrFormat("cannot connect to the server at %s within %s (%s)",
                                                t.base(), absl::FormatDuration(timeout), last));
}

WorkerLoop::WorkerLoop(RunState* st, const WorkerArgs& a, const StopFlag* stop, Sends* sends)
    : st_(st),
      a_(a),
      stop_(stop),
      sends_(sends),
      deadline_ns_(st->spec.deadline_ms() > 0 ? int64_t{st->spec.deadline_ms()} * 1000000
                                              : std::numeric_limits<int64_t>::max() / 2),
      pending_(a.slots) {}

void WorkerLoop::Run() {
  Tick();
  if (st_->open_loop) {
    schedule_.Start(st_, a_.index, a_.threads, a_.t0);
    SendDue();
  } else {
    for (int i = 0; i < a_.slots && Issue(StepMonoNs()); ++i) {
    }
    Dispatch();
  }
  MaybeEnd();
  io_.run();
}

int64_t WorkerLoop::Deadline(int64_t intended) const {
  // Closed loop: intended is now; open loop: the request may have waited.
  return (st_->open_loop ? StepMonoNs() : intended) + deadline_ns_;
}

bool WorkerLoop::Issue(int64_t intended) {
  uint64_t idx = 0;
  bool warm = false;
  if (!st_->Take(intended, &idx, &warm)) return false;
  pending_.Push({idx, warm, intended});
  ++active_;
  return true;
}

void WorkerLoop::Finished(int64_t end) {
  --active_;
  if (st_->open_loop) {
    SendDue();
  } else {
    Issue(end);  // closed loop: the next one at once
    Dispatch();
  }
  MaybeEnd();
}

void WorkerLoop::Tick() {
  tick_.expires_after(kTick);
  tick_.async_wait([this](const error_code& ec) {
    if (!ec && !ended_) OnTick();
  });
}

void WorkerLoop::OnTick() {
  if (stop_ != nullptr && stop_->stopped() && !sends_->interrupted) {
    sends_->interrupted = true;
    st_->stopping = true;
  }
  CheckDeadlines(StepMonoNs());
  if (st_->open_loop) SendDue();
  MaybeEnd();
  if (!ended_) Tick();
}

// Open loop: what is due, and a timer for the next one.
void WorkerLoop::SendDue() {
  schedule_.SendDue(active_, a_.slots, sends_, [this](int64_t t) { return Issue(t); });
  Dispatch();
  if (schedule_.done() || active_ >= a_.slots || send_armed_) return;
  send_armed_ = true;
  send_timer_.expires_at(
      boost::asio::steady_timer::time_point(std::chrono::nanoseconds(schedule_.next_ns())));
  send_timer_.async_wait([this](const error_code& ec) {
    send_armed_ = false;
    if (ec || ended_) return;
    SendDue();
    MaybeEnd();
  });
}

void WorkerLoop::MaybeEnd() {
  if (ended_ || active_ > 0 || (st_->open_loop && !schedule_.done())) return;
  ended_ = true;
  tick_.cancel();
  send_timer_.cancel();
  CloseAll();
}

}  // namespace http
}  // namespace rsslab
