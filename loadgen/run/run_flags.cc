#include "loadgen/run/run_flags.h"

#include <cstdint>
#include <string>

#include "absl/flags/flag.h"
#include "absl/time/time.h"
#include "loadgen/status_code.h"

ABSL_FLAG(std::string, target, "127.0.0.1:50051",
          "Server data address (Load service); http://HOST:PORT/PATH for HTTP load (HTTP/1.1 or h2c).");
ABSL_FLAG(std::string, control, "127.0.0.1:50052",
          "Server control address (Control service); all:NAME every live worker of the package's "
          "service NAME (phases, snapshots and trims reach each), pid:PID one registered worker "
          "(only entries of this user's processes, or of --as_user's); empty for load-only runs.");
ABSL_FLAG(std::string, scenario, "", "Scenario file (protobuf text format, proto/scenario.proto).");
ABSL_FLAG(std::string, builtin, "", "Built-in scenario: seed (seed 000 exactly), quick (smoke cycle), sweep (seed 000's matrix, needs --agent) or soak (cycles for --duration, e.g. --duration=4h).");
ABSL_FLAG(std::string, print_builtin, "", "Print a built-in scenario's text and exit.");
ABSL_FLAG(double, scale, 0, "Multiply every step's request count by this (default 1).");
ABSL_FLAG(std::string, out, "", "Run directory (default results/<UTC time>-<scenario>/).");
ABSL_FLAG(uint32_t, concurrency, 0, "Closed loop: RPCs in flight (default 64).");
ABSL_FLAG(uint32_t, channels, 0, "Separate HTTP/2 connections to spread RPCs over (default 4).");
ABSL_FLAG(double, rate, 0, "Open loop: requests per second (excludes --concurrency).");
ABSL_FLAG(std::string, arrival, "", "Open loop arrivals: constant (default) or poisson.");
ABSL_FLAG(uint32_t, max_outstanding, 0, "Open loop: cap on RPCs in flight (default 10000); sends held back count as late.");
ABSL_FLAG(uint64_t, requests, 0, "Measured requests per load step (excludes --duration).");
ABSL_FLAG(absl::Duration, duration, absl::ZeroDuration(), "Measured time per load step, e.g. 30s (excludes --requests); for a soak, the soak's length, e.g. 4h.");
ABSL_FLAG(absl::Duration, wait, absl::ZeroDuration(),
          "Every wait step of the scenario (the built-ins' idle 12 s) lasts this long instead, "
          "e.g. 2s for a quick look (at most 24h; 0: as the scenario says).");
ABSL_FLAG(absl::Duration, warmup, absl::ZeroDuration(), "Warm-up time per load step, excluded from the statistics.");
ABSL_FLAG(uint64_t, warmup_requests, 0, "Warm-up requests per load step, excluded from the statistics.");
ABSL_FLAG(uint32_t, deadline_ms, 0, "Per-RPC deadline in ms (default 10000).");
ABSL_FLAG(uint64_t, seed, 0, "Request seed sequence (default 1): the same seed sends the same requests.");
ABSL_FLAG(std::string, params, "", "Handler params for every request, k=v,k=v.");
ABSL_FLAG(uint32_t, payload_bytes, 0, "Payload bytes per request.");
ABSL_FLAG(bool, return_body, false, "Ask the server to return bodies.");
ABSL_FLAG(uint64_t, max_errors, 0, "A load step fails (and stops) once more RPCs than this failed.");
ABSL_FLAG(std::string, client_api, "callback",
          "Closed loop: gRPC client API driving the RPCs, callback (default: completions on gRPC's "
          "threads, calls finished together leave in one write) or cq (completion queues on "
          "--client_threads threads). The open loop always uses cq.");
ABSL_FLAG(int, client_threads, 0, "Completion-queue threads driving the RPCs (default: one per channel, at most max(4, 2 x CPUs the loadgen may run on)).");
ABSL_FLAG(int, max_receive_mb, rsslab::kDefaultMaxReceiveMb,
          "Largest reply message taken, MiB (1-2047): a larger reply fails its call with "
          "RESOURCE_EXHAUSTED naming this flag.");
ABSL_FLAG(absl::Duration, connect_timeout, absl::Seconds(5), "How long to wait for the server to accept connections.");
ABSL_FLAG(absl::Duration, control_timeout, absl::Seconds(60), "Deadline of each control RPC (phase, snapshot, trim).");
ABSL_FLAG(std::string, progress, "auto", "auto (live line on a TTY, else a line per step), live, lines or none.");
ABSL_FLAG(bool, fsync, false, "fsync events.jsonl after every record (flushed always).");
ABSL_FLAG(std::string, metrics_listen, "",
          "Serve this run's progress as Prometheus metrics (HTTP GET /metrics) at HOST:PORT; a "
          "bare PORT means 127.0.0.1:PORT. Off when empty. No authentication: keep it on "
          "loopback or a network only the scraper reaches.");
ABSL_FLAG(absl::Duration, metrics_hold, absl::ZeroDuration(),
          "With --metrics_listen: after the run, keep serving the final values this long (e.g. "
          "60s, one scrape interval or more) so a scraper sees them; Ctrl-C ends it early.");
ABSL_FLAG(bool, resume, false,
          "Sweeps: continue the interrupted sweep in --out=DIR: same matrix and steps "
          "(checked against its header), cells with a successful result are kept, the rest "
          "run, the summary covers all of them.");
