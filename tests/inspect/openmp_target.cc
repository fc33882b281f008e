// A target process for inspect's openmp_idle rule: runs one OpenMP parallel
// region (libgomp starts its team: OMP_NUM_THREADS or one per CPU, the
// calling thread included), prints "inspect_target ready pid=PID team=N"
// and waits for SIGTERM while the team idles.
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

int main() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);  // before the team: inherited
  int team = 0;
#pragma omp parallel
  {
#pragma omp atomic
    ++team;
  }
  printf("inspect_target ready pid=%d team=%d\n", getpid(), team);
  fflush(stdout);
  int sig = 0;
  sigwait(&set, &sig);
  return 0;
}
