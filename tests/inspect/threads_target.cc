// A target process for inspect's tests: starts --threads threads that each
// malloc --malloc_kib KiB in 1 KiB blocks (with glibc, each new thread that
// mallocs gets an arena of its own until MALLOC_ARENA_MAX or 8 x cpus), then
// prints "inspect_target ready pid=PID threads=N" and waits for SIGTERM.
//
//   threads_target --threads=16 --malloc_kib=512
//   threads_target --threads=10000 --stack_kib=64 --malloc_kib=0
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <vector>

namespace {

long Flag(int argc, char** argv, const char* name, long def) {  // NOLINT(runtime/int)
  const size_t n = strlen(name);
  for (int i = 1; i < argc; ++i) {
    if (strncmp(argv[i], name, n) == 0 && argv[i][n] == '=') return strtol(argv[i] + n + 1, nullptr, 10);
  }
  return def;
}

pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
int started = 0;
long malloc_kib = 0;  // NOLINT(runtime/int)

void* Run(void*) {
  // Kept: the blocks stay allocated, so the arena stays resident.
  std::vector<void*>* keep = new std::vector<void*>();
  for (long i = 0; i < malloc_kib; ++i) {  // NOLINT(runtime/int)
    void* p = malloc(1024);
    memset(p, 1, 1024);
    keep->push_back(p);
  }
  pthread_mutex_lock(&mu);
  ++started;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  // Idle forever, as an idle pool thread: blocked in a futex.
  pthread_mutex_lock(&mu);
  while (true) pthread_cond_wait(&cv, &mu);
  return keep;
}

}  // namespace

int main(int argc, char** argv) {
  const long threads = Flag(argc, argv, "--threads", 16);  // NOLINT(runtime/int)
  const long stack_kib = Flag(argc, argv, "--stack_kib", 256);  // NOLINT(runtime/int)
  malloc_kib = Flag(argc, argv, "--malloc_kib", 256);
  if (threads < 0 || threads > 100000 || stack_kib < 16 || malloc_kib < 0) {
    fprintf(stderr, "threads_target: bad flags\n");
    return 2;
  }
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);  // inherited: only main waits for it
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, static_cast<size_t>(stack_kib) * 1024);
  for (long i = 0; i < threads; ++i) {  // NOLINT(runtime/int)
    pthread_t t;
    int err = pthread_create(&t, &attr, Run, nullptr);
    if (err != 0) {
      fprintf(stderr, "threads_target: pthread_create #%ld: %s\n", i, strerror(err));
      return 1;
    }
    pthread_detach(t);
  }
  pthread_mutex_lock(&mu);
  while (started < threads) pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
  printf("inspect_target ready pid=%d threads=%ld\n", getpid(), threads);
  fflush(stdout);
  int sig = 0;
  sigwait(&set, &sig);
  _exit(0);
}
