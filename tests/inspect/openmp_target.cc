// A target process for inspect's openmp_idle rule: runs one OpenMP parallel
// region (libgomp starts its team: OMP_NUM_THREADS or one per CPU, the
// calling thread included), waits until its workers block, prints
// "inspect_target ready pid=PID team=N" and waits for SIGTERM while the
// team idles.
#include <dirent.h>
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <fstream>
#include <string>

namespace {

// True when every thread but the main one sleeps (stat state S): libgomp's
// workers spin for a while after a region before they block, longer on a
// loaded machine.
bool TeamAsleep() {
  DIR* d = opendir("/proc/self/task");
  if (d == nullptr) return false;
  bool asleep = true;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.' || std::to_string(getpid()) == e->d_name) continue;
    std::ifstream in(std::string("/proc/self/task/") + e->d_name + "/stat");
    std::string line;
    std::getline(in, line);
    size_t close = line.rfind(')');
    if (close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'S') {
      asleep = false;
    }
  }
  closedir(d);
  return asleep;
}

}  // namespace

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
  for (int i = 0; i < 2000 && !TeamAsleep(); ++i) usleep(10000);  // at most 20 s
  printf("inspect_target ready pid=%d team=%d\n", getpid(), team);
  fflush(stdout);
  int sig = 0;
  sigwait(&set, &sig);
  return 0;
}
