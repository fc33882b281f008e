// What the metrics endpoint costs the process that embeds it: threads and
// resident memory added by starting it, and CPU per scrape (the serving
// process's own CPU; the client is a forked child). Same body for both
// implementations, rendered from a fixed string so only HTTP is measured.
//
//   endpoint_cost --impl=own|civetweb [--scrapes=2000] [--body_bytes=8000]
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "bench/metrics_endpoint/civetweb_metrics_server.h"
#include "common/metrics/http_server.h"

ABSL_FLAG(std::string, impl, "own", "own or civetweb");
ABSL_FLAG(int, scrapes, 2000, "sequential scrapes by the client");
ABSL_FLAG(int, body_bytes, 8000, "exposition size (the server's is about this)");

namespace {

long StatusKib(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (absl::StartsWith(line, key)) return std::stol(line.substr(strlen(key)));
  }
  return -1;
}

std::map<std::string, int> ThreadNames() {
  std::map<std::string, int> names;
  DIR* d = opendir("/proc/self/task");
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream f(absl::StrCat("/proc/self/task/", e->d_name, "/comm"));
    std::string comm;
    std::getline(f, comm);
    ++names[comm];
  }
  closedir(d);
  return names;
}

// Voluntary context switches of the threads whose name is not in `before`
// (the endpoint's): how often they wake up.
long NewThreadWakeups(const std::map<std::string, int>& before) {
  long total = 0;
  DIR* d = opendir("/proc/self/task");
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    const std::string dir = absl::StrCat("/proc/self/task/", e->d_name);
    std::ifstream c(dir + "/comm");
    std::string comm;
    std::getline(c, comm);
    if (before.count(comm)) continue;
    std::ifstream f(dir + "/status");
    std::string line;
    while (std::getline(f, line)) {
      if (absl::StartsWith(line, "voluntary_ctxt_switches:")) total += std::stol(line.substr(24));
    }
  }
  closedir(d);
  return total;
}

bool Scrape(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) return false;
  const char req[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
  (void)!send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL);
  char buf[16384];
  std::string out;
  ssize_t n;
  while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) out.append(buf, n);
  close(fd);
  return absl::StartsWith(out, "HTTP/1.1 200");
}

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// Threads the endpoint added, as "name" x count, and how many in all.
std::string AddedThreads(const std::map<std::string, int>& before,
                         const std::map<std::string, int>& after, int* count) {
  std::vector<std::string> added;
  *count = 0;
  for (const auto& [n, c] : after) {
    const int b = before.count(n) ? before.at(n) : 0;
    if (c > b) {
      added.push_back(absl::StrCat(n, "x", c - b));
      *count += c - b;
    }
  }
  return absl::StrJoin(added, ",");
}

// n scrapes from a child process (its CPU is not ours); true if all got 200.
bool ScrapeFromChild(int port, int n) {
  pid_t child = fork();
  if (child == 0) {
    int ok = 0;
    for (int i = 0; i < n; ++i) ok += Scrape(port) ? 1 : 0;
    _exit(ok == n ? 0 : 1);
  }
  int st = 0;
  waitpid(child, &st, 0);
  return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

// Starts the endpoint named by --impl; its port, 0 for an unknown name, -1 on failure.
int StartEndpoint(const std::string& impl, std::function<std::string()> render,
                  std::unique_ptr<rsslab::metrics::MetricsHttpServer>* own,
                  std::unique_ptr<rsslab::metrics::CivetwebMetricsServer>* civet) {
  if (impl == "own") {
    auto s = rsslab::metrics::MetricsHttpServer::Start("127.0.0.1:0", render);
    if (!s.ok()) return -1;
    *own = std::move(*s);
    return (*own)->port();
  }
  if (impl == "civetweb") {
    auto s = rsslab::metrics::CivetwebMetricsServer::Start(
        "127.0.0.1:0", render, rsslab::metrics::CivetwebMetricsServer::Options());
    if (!s.ok()) {
      fprintf(stderr, "%s\n", std::string(s.status().message()).c_str());
      return -1;
    }
    *civet = std::move(*s);
    return (*civet)->port();
  }
  fprintf(stderr, "--impl=own|civetweb\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string impl = absl::GetFlag(FLAGS_impl);
  const int n = absl::GetFlag(FLAGS_scrapes);
  const int body_bytes = absl::GetFlag(FLAGS_body_bytes);
  if (n < 1 || n > 10000000 || body_bytes < 0 || body_bytes > (64 << 20)) {
    fprintf(stderr, "--scrapes must be 1..10000000, --body_bytes at most 64 MiB\n");
    return 2;
  }
  const std::string body(static_cast<size_t>(body_bytes), 'x');
  auto render = [&body] { return body; };
  const long rss0 = StatusKib("VmRSS:");
  const auto names0 = ThreadNames();
  std::unique_ptr<rsslab::metrics::MetricsHttpServer> own;
  std::unique_ptr<rsslab::metrics::CivetwebMetricsServer> civet;
  const int port = StartEndpoint(impl, render, &own, &civet);
  if (port <= 0) return port == 0 ? 2 : 1;
  absl::SleepFor(absl::Milliseconds(200));  // let the library's threads start
  const long rss1 = StatusKib("VmRSS:");
  int added_count = 0;
  const std::string added = AddedThreads(names0, ThreadNames(), &added_count);
  // Idle: 5 s with no scrape; CPU and how often the endpoint's threads wake.
  const double idle0 = CpuSeconds();
  const long wake0 = NewThreadWakeups(names0);
  absl::SleepFor(absl::Seconds(5));
  const double idle_cpu = (CpuSeconds() - idle0) / 5;
  const double idle_wakeups = (NewThreadWakeups(names0) - wake0) / 5.0;

  const double cpu0 = CpuSeconds();
  const absl::Time t0 = absl::Now();
  const bool client_ok = ScrapeFromChild(port, n);
  const double wall = absl::ToDoubleSeconds(absl::Now() - t0);
  const double cpu = CpuSeconds() - cpu0;
  const long rss2 = StatusKib("VmRSS:");
  const absl::Time s0 = absl::Now();
  if (own) own->Stop();
  if (civet) civet->Stop();
  const double stop_ms = absl::ToDoubleMilliseconds(absl::Now() - s0);
  printf("impl=%s threads_added=%d (%s) rss_added_kib=%ld rss_after_%d_scrapes_kib=%ld "
         "idle_cpu_ms_per_s=%.3f idle_wakeups_per_s=%.1f cpu_us_per_scrape=%.1f "
         "wall_us_per_scrape=%.1f stop_ms=%.0f client_ok=%s\n",
         impl.c_str(), added_count, added.c_str(), rss1 - rss0, n,
         rss2 - rss0, idle_cpu * 1000, idle_wakeups, cpu * 1e6 / n, wall * 1e6 / n, stop_ms,
         client_ok ? "yes" : "no");
  return 0;
}
