#include "server/load_service.h"

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <new>
#include <utility>

#include "common/grpc_status.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "grpcpp/support/proto_buffer_writer.h"

namespace rsslab {

// One Load call from the moment a slot is primed until both its answer has
// gone out (finish) and gRPC is done with it (done); only then is it
// deleted, whichever comes first. Its request and response are what the
// core's worker reads and writes.
//
// A HandleStream call (`streaming`) reads one request at a time: each goes
// through Serve's path to the core like a Handle call's, its response is
// written, and only then is the next one read; the client's end of writing
// finishes the stream OK, a refusal or handler error finishes it with that
// status. Its events all come to the io thread's queue.
struct LoadService::Call {
  enum Kind { kRequest, kRead, kWrite, kFinish, kDone };
  struct Tag {
    Call* call;
    Kind kind;
  };
  Call(bool g, bool s) : generic(g), streaming(s) {}
  const bool generic;
  // Set before any operation starts: by Accept (raw HandleStream) or on the
  // request (generic, by method name).
  bool streaming;
  Tag request_tag{this, kRequest};
  Tag read_tag{this, kRead};
  Tag write_tag{this, kWrite};
  Tag finish_tag{this, kFinish};
  Tag done_tag{this, kDone};
  // A GenericServerContext is a ServerContext: the raw method takes it too.
  grpc::GenericServerContext ctx;
  grpc::GenericServerAsyncReaderWriter stream{&ctx};
  // Handle is a raw method: the bytes are parsed here, so a request that
  // does not parse (a param name that is not UTF-8, which proto3 refuses)
  // gets INVALID_ARGUMENT with a sentence, where gRPC's own parse answers
  // UNIMPLEMENTED with an empty message.
  grpc::ByteBuffer raw_request;
  grpc::ByteBuffer raw_response;
  rsslab::v1::HandleRequest request;
  rsslab::v1::HandleResponse response;
  grpc::ServerAsyncResponseWriter<grpc::ByteBuffer> writer{&ctx};
  // Set on the io thread when gRPC reports the call over before it was
  // answered (client cancel, deadline, reset); read by the worker, which
  // then skips the handler. The async API allows IsCancelled() only after
  // the done tag, hence the copy.
  std::atomic<bool> cancelled{false};
  // Whoever reaps (under reap_mu_).
  bool finished = false;
  // A stream that ended without a Finish (broken, or the queue shut down).
  bool finished_early = false;
  bool done = false;
};

LoadService::~LoadService() {
  Stop();
  absl::MutexLock lock(&calls_mu_);
  for (void* block : calls_free_) ::operator delete(block);
  calls_free_.clear();
}

LoadService::Call* LoadService::NewCall(bool streaming) {
  void* block = nullptr;
  {
    absl::MutexLock lock(&calls_mu_);
    if (!calls_free_.empty()) {
      block = calls_free_.back();
      calls_free_.pop_back();
    }
  }
  if (block == nullptr) block = ::operator new(sizeof(Call));
  return new (block) Call(generic_mode_, streaming);
}

void LoadService::FreeCall(Call* c) {
  c->~Call();
  absl::MutexLock lock(&calls_mu_);
  calls_free_.push_back(c);
}

void LoadService::Start(std::unique_ptr<grpc::ServerCompletionQueue> cq) {
  cq_ = std::move(cq);
  // A few slots, so calls that arrive together are all matched at once
  // rather than one per loop turn.
  for (int i = 0; i < 8; ++i) Accept(/*streaming=*/false);
  // Raw HandleStream calls are primed apart (generic ones arrive as any).
  if (!generic_mode_) {
    for (int i = 0; i < 4; ++i) Accept(/*streaming=*/true);
  }
  io_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "rsslab-io");
    // SCHED_BATCH: a request that arrives does not preempt a worker in the
    // middle of its handler on the same CPU; this thread takes whatever has
    // arrived when the worker waits or its time slice ends. Which worker
    // runs which call, and in what order, does not change. On one CPU it
    // cut context switches from 1.9 to 0.16 per seed request and server
    // CPU by about 17 % (docs/BENCHMARKS.md, "Seed overhead").
    // Unprivileged (the priority must be 0); if refused, nothing else changes.
    sched_param param{};
    pthread_setschedparam(pthread_self(), SCHED_BATCH, &param);
    Loop();
  });
}

void LoadService::Accept(bool streaming) {
  absl::MutexLock lock(&accept_mu_);
  // Once Stop() has shut the queue down, nothing may be added to it.
  if (stopping_) return;
  Call* c = NewCall(streaming);
  c->ctx.AsyncNotifyWhenDone(&c->done_tag);
  if (streaming) {
    service_.RequestHandleStream(&c->ctx, &c->stream, cq_.get(), cq_.get(), &c->request_tag);
    return;
  }
  if (generic_mode_) {
    // The call's own events (read, finish, done) come to the io thread.
    generic_.RequestCall(&c->ctx, &c->stream, cq_.get(), cq_.get(), &c->request_tag);
    return;
  }
  service_.RequestHandle(&c->ctx, &c->raw_request, &c->writer, &reap_cq_, cq_.get(),
                         &c->request_tag);
}

void LoadService::Register(grpc::ServerBuilder* builder) {
  if (generic_mode_) {
    builder->RegisterAsyncGenericService(&generic_);
  } else {
    builder->RegisterService(&service_);
  }
}

void LoadService::FinishWithError(Call* c, const grpc::Status& status) {
  if (c->streaming) {
    FinishStream(c, status);
  } else if (c->generic) {
    c->stream.Finish(status, &c->finish_tag);
  } else {
    c->writer.FinishWithError(status, &c->finish_tag);
  }
}

bool LoadService::StartStreamOp(Call* c, const std::function<void()>& start) {
  absl::MutexLock lock(&accept_mu_);
  if (stopping_) {
    // The queue is shut down: the call is over for us (its done tag, if
    // not yet drained, still comes).
    c->finished_early = true;
    return false;
  }
  start();
  return true;
}

void LoadService::FinishStream(Call* c, const grpc::Status& status) {
  StartStreamOp(c, [&] { c->stream.Finish(status, &c->finish_tag); });
}

void LoadService::ReadStream(Call* c) {
  StartStreamOp(c, [&] { c->stream.Read(&c->raw_request, &c->read_tag); });
}

void LoadService::Serve(Call* c) {
  {
    grpc::ProtoBufferReader reader(&c->raw_request);
    if (!c->request.ParseFromZeroCopyStream(&reader)) {
      FinishWithError(c, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                      "the request does not parse as rsslab.v1.HandleRequest: a "
                                      "string (a param name or value) is not valid UTF-8, or the "
                                      "bytes are not a HandleRequest"));
      return;
    }
    c->raw_request.Clear();
  }
  if (c->streaming) {
    // The previous message's (its write has completed: the next message is
    // read only then); the writer wants an empty buffer.
    c->response.Clear();
    c->raw_response.Clear();
  }
  core_->Submit(
      &c->request, &c->response, [c] { return c->cancelled.load(std::memory_order_relaxed); },
      [this, c](const absl::Status& s) {
        // On the worker (or here, for refusals): the write happens in
        // this call; then whatever has come back is freed.
        grpc::Status status = ToGrpc(s);
        if (s.ok()) {
          bool own = false;
          status = grpc::GenericSerialize<grpc::ProtoBufferWriter, rsslab::v1::HandleResponse>(
              c->response, &c->raw_response, &own);
        }
        if (!status.ok()) {
          FinishWithError(c, status);
        } else if (c->streaming) {
          StartStreamOp(c, [&] {
            c->stream.Write(c->raw_response, grpc::WriteOptions(), &c->write_tag);
          });
        } else if (c->generic) {
          c->stream.WriteAndFinish(c->raw_response, grpc::WriteOptions(), grpc::Status::OK,
                                   &c->finish_tag);
        } else {
          c->writer.Finish(c->raw_response, grpc::Status::OK, &c->finish_tag);
        }
        // Not reaped here: the io thread frees every call (see reap_cq_).
      });
}

void LoadService::Reap() {
  if (!reap_mu_.TryLock()) return;
  void* tag = nullptr;
  bool ok = false;
  while (reap_cq_.AsyncNext(&tag, &ok, gpr_time_0(GPR_CLOCK_MONOTONIC)) ==
         grpc::CompletionQueue::GOT_EVENT) {
    ReapOne(tag);
  }
  reap_mu_.Unlock();
}

void LoadService::ReapOne(void* tag) {
  auto* t = static_cast<Call::Tag*>(tag);
  Call* c = t->call;
  if (t->kind == Call::kFinish) {
    c->finished = true;
  } else {
    if (c->ctx.IsCancelled()) c->cancelled.store(true, std::memory_order_relaxed);
    c->done = true;
  }
  if ((c->finished || c->finished_early) && c->done) FreeCall(c);
}

void LoadService::Loop() {
  void* tag = nullptr;
  bool ok = false;
  for (;;) {
    // Woken by each new call while load comes; when none comes, still
    // reaps the last answered calls within kIdleReap.
    const grpc::CompletionQueue::NextStatus next =
        cq_->AsyncNext(&tag, &ok, std::chrono::system_clock::now() + kIdleReap);
    if (next == grpc::CompletionQueue::SHUTDOWN) break;
    Reap();
    if (next == grpc::CompletionQueue::TIMEOUT) continue;
    auto* t = static_cast<Call::Tag*>(tag);
    Call* c = t->call;
    switch (t->kind) {
      case Call::kRequest: {
        if (!ok) {
          // The server is shutting down: this slot was never matched to a
          // call, so no done tag follows.
          FreeCall(c);
          break;
        }
        Accept(/*streaming=*/c->streaming && !c->generic);
        if (c->generic) c->streaming = c->ctx.method() == "/rsslab.v1.Load/HandleStream";
        if (c->generic && !c->streaming && c->ctx.method() != "/rsslab.v1.Load/Handle") {
          FinishWithError(c, grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                                          "the data port serves rsslab.v1.Load/Handle and "
                                          "HandleStream only"));
          break;
        }
        grpc::Status auth = security_->Authorize(c->ctx);
        if (!auth.ok()) {
          // Generic: the request was never read, and is not now.
          FinishWithError(c, auth);
          break;
        }
        if (c->streaming) {
          ReadStream(c);
          break;
        }
        if (c->generic) {
          c->stream.Read(&c->raw_request, &c->read_tag);
          break;
        }
        Serve(c);
        break;
      }
      case Call::kRead:
        if (!ok && c->streaming) {
          // The client's end of writing (or the call's end): answered, done.
          FinishStream(c, grpc::Status::OK);
          break;
        }
        if (!ok) {
          FinishWithError(c, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                          "the call carried no request message"));
          break;
        }
        Serve(c);
        break;
      case Call::kWrite:
        if (!ok) {
          // The stream is broken (cancelled, reset): nothing to finish; the
          // done tag frees the call.
          absl::MutexLock lock(&reap_mu_);
          c->finished_early = true;
          if (c->done) FreeCall(c);
          break;
        }
        ReadStream(c);
        break;
      case Call::kFinish:
      case Call::kDone:
        // Raw calls report these on reap_cq_; generic ones here.
        {
          absl::MutexLock lock(&reap_mu_);
          ReapOne(tag);
        }
        break;
    }
  }
}

void LoadService::Stop() {
  {
    absl::MutexLock lock(&accept_mu_);
    if (stopping_ || cq_ == nullptr) return;
    stopping_ = true;
    cq_->Shutdown();
  }
  // Next() returns false once every tag has been drained.
  if (io_.joinable()) io_.join();
  // The server is shut down and the workers are gone: every answered call
  // has reported back, or will (cancelled ones) without new work.
  reap_cq_.Shutdown();
  absl::MutexLock lock(&reap_mu_);
  void* tag = nullptr;
  bool ok = false;
  while (reap_cq_.Next(&tag, &ok)) ReapOne(tag);
}

}  // namespace rsslab
