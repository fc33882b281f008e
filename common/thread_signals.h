// Threads that never run the process's signal handlers. A process-directed
// signal (SIGTERM, SIGINT, SIGHUP...) goes to any thread that does not
// block it, and a handler that ends the process from there (uWSGI's
// die-on-term calls exit(), which runs Py_FinalizeEx on that thread) hangs
// or crashes when the thread is a library's helper, in the middle of its
// own work. A thread inherits its creator's signal mask: threads started
// while this guard lives, and the threads they start, leave such signals
// to the process's own threads. The faults (SIGSEGV, SIGBUS, SIGFPE,
// SIGILL, SIGTRAP, SIGABRT, SIGSYS) stay unblocked, so a crash is still
// reported where it happens.
//
// Example:
//   {
//     ScopedAsyncSignalsBlocked blocked;  // on the calling thread, until the scope ends
//     std::thread(Loop).detach();         // Loop's thread never takes SIGTERM
//   }

#ifndef RSSLAB_COMMON_THREAD_SIGNALS_H_
#define RSSLAB_COMMON_THREAD_SIGNALS_H_

#include <signal.h>

namespace rsslab {

class ScopedAsyncSignalsBlocked {
 public:
  ScopedAsyncSignalsBlocked();   // blocks them on the calling thread
  ~ScopedAsyncSignalsBlocked();  // restores the mask it found (pending signals then arrive)
  ScopedAsyncSignalsBlocked(const ScopedAsyncSignalsBlocked&) = delete;
  ScopedAsyncSignalsBlocked& operator=(const ScopedAsyncSignalsBlocked&) = delete;

 private:
  sigset_t old_;
};

}  // namespace rsslab

#endif  // RSSLAB_COMMON_THREAD_SIGNALS_H_
