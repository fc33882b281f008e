#include "common/thread_signals.h"

#include <pthread.h>

#include <initializer_list>

namespace rsslab {

ScopedAsyncSignalsBlocked::ScopedAsyncSignalsBlocked() {
  sigset_t block;
  sigfillset(&block);
  for (int fault : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT, SIGSYS}) {
    sigdelset(&block, fault);
  }
  pthread_sigmask(SIG_BLOCK, &block, &old_);
}

ScopedAsyncSignalsBlocked::~ScopedAsyncSignalsBlocked() {
  pthread_sigmask(SIG_SETMASK, &old_, nullptr);
}

}  // namespace rsslab
