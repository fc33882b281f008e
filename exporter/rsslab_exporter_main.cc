// rsslab_exporter: one Prometheus scrape target for every worker of every
// rsslab-registered service on this host (exporter/fleet.h), plus the
// memory of the cgroup it runs in (exporter/cgroup.h).
//
//   rsslab_exporter [--listen=127.0.0.1:9470] [--control_timeout=2s] [--map_interval=60s]
//                   [--as_user=svc,...] [--auth_token_file=FILE]
//
//   GET /metrics   every worker's and master's series, the cgroup's
//   GET /sd        Prometheus http_sd JSON listing the workers' own /metrics
//
// Beyond loopback it needs --auth_token_file: every request must then carry
// "Authorization: Bearer <token>" (the same token is sent to the workers'
// Control services). Prints "rsslab_exporter ready listen=HOST:PORT" when
// it serves.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/auth.h"
#include "common/flags_parse.h"
#include "common/listen.h"
#include "common/metrics/http_server.h"
#include "common/procfs/procfs.h"
#include "registry/registry.h"
#include "registry/registry_flags.h"
#include "exporter/cgroup.h"
#include "exporter/fleet.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:9470",
          "HOST:PORT (or PORT: loopback) to serve /metrics and /sd on; beyond loopback only "
          "with --auth_token_file.");
ABSL_FLAG(absl::Duration, control_timeout, absl::Seconds(2),
          "Deadline of each worker's Control call in a scrape (calls run at once).");
ABSL_FLAG(absl::Duration, map_interval, absl::Seconds(60),
          "A process's smaps (arenas, heap, stacks), maps and environ are read at most this "
          "often; its status (RSS, anon, threads) every scrape. 0s: all every scrape.");
ABSL_FLAG(std::string, cgroup_root, "/sys/fs/cgroup",
          "Where the cgroup file systems are mounted; empty: no cgroup series.");

namespace {

[[noreturn]] void DieUsage(const std::string& msg) {
  fprintf(stderr, "rsslab_exporter: %s\n", msg.c_str());
  exit(2);
}

volatile sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }

rsslab::exporter::FleetOptions FleetOptionsFromFlags(const rsslab::registry::Trust& trust,
                                                   const rsslab::Security& security) {
  using namespace rsslab;
  exporter::FleetOptions o;
  o.dirs = registry::Dirs();
  o.trust = trust;
  o.security = security;
  o.control_timeout = absl::GetFlag(FLAGS_control_timeout);
  o.map_interval = absl::GetFlag(FLAGS_map_interval);
  const std::string cgroup_root = absl::GetFlag(FLAGS_cgroup_root);
  if (!cgroup_root.empty()) {
    // Read per scrape: the cgroup's figures are the point; they move.
    o.extra = [cgroup_root](metrics::Exposition* e) {
      absl::StatusOr<std::string> self = procfs::ReadProcFile(0, "cgroup");
      if (!self.ok()) return;
      absl::StatusOr<exporter::CgroupMemory> m = exporter::ReadCgroupMemory(cgroup_root, *self);
      if (m.ok()) exporter::AppendCgroupMetrics(*m, e);
    };
    o.memory_limit = [cgroup_root]() -> int64_t {
      absl::StatusOr<std::string> self = procfs::ReadProcFile(0, "cgroup");
      if (!self.ok()) return -1;
      absl::StatusOr<exporter::CgroupMemory> m = exporter::ReadCgroupMemory(cgroup_root, *self);
      return m.ok() ? m->limit_bytes : -1;
    };
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "One scrape target for every rsslab worker on this host.\n"
      "  rsslab_exporter [--listen=127.0.0.1:9470] [--as_user=USER,...] [--auth_token_file=FILE]");
  std::vector<char*> rest = rsslab::ParseFlags(argc, argv);
  if (rest.size() > 1) DieUsage(absl::StrCat("unexpected argument '", rest[1], "'"));
  using namespace rsslab;
  absl::StatusOr<Security> security = Security::FromFlags();
  if (!security.ok()) DieUsage(std::string(security.status().message()));
  absl::StatusOr<registry::Trust> trust = registry::TrustFromFlags();
  if (!trust.ok()) DieUsage(std::string(trust.status().message()));

  const std::string listen = metrics::DefaultToLoopback(absl::GetFlag(FLAGS_listen));
  absl::StatusOr<HostPort> hp = ParseHostPort(listen);
  if (!hp.ok()) DieUsage(absl::StrCat("--listen: ", hp.status().message()));
  // Plain HTTP: TLS files protect nothing here, only the token does.
  if (!IsLoopback(hp->host) && !security->has_token()) {
    DieUsage(absl::StrCat("refusing --listen=", listen,
                          ": serving beyond loopback needs --auth_token_file (the exporter "
                          "speaks plain HTTP; its token guards every request)"));
  }
  if (absl::GetFlag(FLAGS_control_timeout) <= absl::ZeroDuration() ||
      absl::GetFlag(FLAGS_control_timeout) > absl::Seconds(60)) {
    DieUsage("--control_timeout must be more than 0 and at most 60s");
  }
  if (absl::GetFlag(FLAGS_map_interval) < absl::ZeroDuration() ||
      absl::GetFlag(FLAGS_map_interval) > absl::Hours(1)) {
    DieUsage("--map_interval must be 0s to 1h");
  }

  exporter::Fleet fleet(FleetOptionsFromFlags(*trust, *security));

  metrics::MetricsHttpServer::Options ho;
  ho.thread_name = "rsslab-exporter";
  // A scrape waits for the slowest worker's Control: more than that.
  ho.io_timeout = absl::GetFlag(FLAGS_control_timeout) + absl::Seconds(5);
  ho.routes["/sd"] = {"application/json", [&fleet] { return fleet.ServiceDiscovery(); }};
  if (security->has_token()) {
    const Security* sec = &*security;
    ho.authorize = [sec](const std::string* a) { return sec->AuthorizeHeader(a); };
  }
  auto server = metrics::MetricsHttpServer::Start(listen, [&fleet] { return fleet.Metrics(); }, ho);
  if (!server.ok()) {
    fprintf(stderr, "rsslab_exporter: %s (--listen)\n", std::string(server.status().message()).c_str());
    return 1;
  }
  signal(SIGINT, OnSignal);
  signal(SIGTERM, OnSignal);
  printf("rsslab_exporter ready listen=%s\n", (*server)->address().c_str());
  fflush(stdout);
  while (!g_stop) pause();
  (*server)->Stop();
  return 0;
}
