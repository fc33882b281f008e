#include "agent/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"

namespace rsslab {
namespace launch {

absl::StatusOr<pid_t> Spawn(const SpawnOptions& o) {
  // Everything the child needs is built before fork: after fork only
  // async-signal-safe calls (the parent may have other threads holding
  // malloc's locks).
  std::vector<std::string> argv_s{o.binary};
  argv_s.insert(argv_s.end(), o.args.begin(), o.args.end());
  std::vector<char*> argv, envp;
  for (std::string& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_s = o.env;
  for (std::string& s : env_s) envp.push_back(s.data());
  envp.push_back(nullptr);
  int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  int err_pipe[2];
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    if (devnull >= 0) close(devnull);
    return absl::InternalError(absl::StrCat("pipe2: ", strerror(errno)));
  }
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  for (int c : o.cpus) {
    if (c < 0 || c >= CPU_SETSIZE) {
      close(err_pipe[0]);
      close(err_pipe[1]);
      if (devnull >= 0) close(devnull);
      return absl::InvalidArgumentError(absl::StrCat("CPU ", c, " out of range"));
    }
    CPU_SET(c, &cpus);
  }
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    int e = errno;
    close(err_pipe[0]);
    close(err_pipe[1]);
    if (devnull >= 0) close(devnull);
    return absl::InternalError(absl::StrCat("fork: ", strerror(e)));
  }
  if (pid == 0) {
    if (o.detach) {
      pid_t grandchild = fork();
      if (grandchild < 0) {
        int e = errno;
        ssize_t ignored = write(err_pipe[1], &e, sizeof(e));
        (void)ignored;
        _exit(127);
      }
      if (grandchild > 0) _exit(0);
      setsid();  // a session of its own: no terminal's signals reach it
    } else if (o.new_process_group) {
      setpgid(0, 0);
    }
    if (!o.cpus.empty() && sched_setaffinity(0, sizeof(cpus), &cpus) != 0) {
      int e = errno;
      ssize_t ignored = write(err_pipe[1], &e, sizeof(e));
      (void)ignored;
      _exit(127);
    }
    if (o.parent_death_signal != 0) {
      prctl(PR_SET_PDEATHSIG, o.parent_death_signal);
      if (getppid() != parent) _exit(127);  // the parent died before prctl
    }
    // Undo any blocking the parent did for sigwait; exec keeps the mask.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    if (!o.cwd.empty() && chdir(o.cwd.c_str()) != 0) {
      int e = errno;
      ssize_t ignored = write(err_pipe[1], &e, sizeof(e));
      (void)ignored;
      _exit(127);
    }
    int in = o.stdin_fd >= 0 ? o.stdin_fd : devnull;
    if (in >= 0) dup2(in, 0);
    if (o.stdout_fd >= 0) dup2(o.stdout_fd, 1);
    if (o.stderr_fd >= 0) dup2(o.stderr_fd, 2);
    execve(argv[0], argv.data(), envp.data());
    int e = errno;
    ssize_t ignored = write(err_pipe[1], &e, sizeof(e));
    (void)ignored;
    _exit(127);
  }
  close(err_pipe[1]);
  if (devnull >= 0) close(devnull);
  int child_errno = 0;
  ssize_t n;
  do {
    n = read(err_pipe[0], &child_errno, sizeof(child_errno));
  } while (n < 0 && errno == EINTR);
  close(err_pipe[0]);
  if (n == sizeof(child_errno)) {
    // The caller's reaper (or its waitpid) collects the dead child.
    return absl::FailedPreconditionError(
        absl::StrCat("cannot execute ", o.binary, ": ", strerror(child_errno)));
  }
  return pid;
}

}  // namespace launch
}  // namespace rsslab
