// The goal: building one request from a --data template for a 10-field
// message costs under 2 us. The message and template are a user's (their
// .proto parsed at run time, as rsslab_loadgen --proto does); timed are
// RequestSource::Build alone and Build + serialization into a gRPC slice,
// what the loadgen does per request (loadgen/engine.cc IssueGeneric).
//
//   bazel build //bench:template_build && .bazel/bin/bench/template_build
//   .bazel/bin/bench/template_build --benchmark_repetitions=5
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <string>

#include "benchmark/benchmark.h"
#include "grpcpp/support/slice.h"
#include "loadgen/proto_call.h"
#include "proto/scenario.pb.h"

namespace {

// Ten fields: numbers, strings, an enum, a nested message, a repeated one.
constexpr char kProto[] = R"(
syntax = "proto3";
package telemetry.v1;
enum Unit { UNIT_UNSPECIFIED = 0; CELSIUS = 1; KELVIN = 2; }
message Place { double lat = 1; double lon = 2; string site = 3; }
message Reading {
  string device = 1;
  uint64 seq = 2;
  int64 taken_ns = 3;
  double value = 4;
  Unit unit = 5;
  Place place = 6;
  repeated string labels = 7;
  bool calibrated = 8;
  uint32 shard = 9;
  string note = 10;
}
message Ack { uint64 seq = 1; }
service Ingest { rpc Put(Reading) returns (Ack); }
)";

// Seven of the ten templated (numbers, strings, nested, repeated), three
// literal: what a realistic --data looks like.
constexpr char kTemplate[] =
    R"({"device": "dev-{{rand_str 8}}", "seq": {{seq}}, "taken_ns": {{rand_int 0 1000000000000}},
        "value": 21.5, "unit": "CELSIUS",
        "place": {"lat": 48.1, "lon": 11.6, "site": "rack-{{rand_int 1 64}}"},
        "labels": ["fixed", "s{{seq}}"], "calibrated": true, "shard": {{rand_int 0 63}},
        "note": "reading {{seq}} of the bench"})";

struct Fixture {
  std::string dir;
  std::unique_ptr<rsslab::ProtoCatalog> catalog;
  std::unique_ptr<rsslab::CallSet> calls;
  std::shared_ptr<const rsslab::RequestSource> source;
  rsslab::v1::LoadSpec spec;

  Fixture() {
    char tmpl[] = "/tmp/rsslab-template-bench.XXXXXX";
    dir = mkdtemp(tmpl);
    std::ofstream(dir + "/reading.proto") << kProto;
    auto c = rsslab::ProtoCatalog::Load({dir + "/reading.proto"}, {});
    if (!c.ok()) {
      fprintf(stderr, "%s\n", std::string(c.status().message()).c_str());
      exit(1);
    }
    catalog = *std::move(c);
    calls = std::make_unique<rsslab::CallSet>(catalog.get());
    spec.set_call("telemetry.v1.Ingest/Put");
    spec.set_data(kTemplate);
    if (absl::Status s = calls->Add(spec); !s.ok()) {
      fprintf(stderr, "%s\n", std::string(s.message()).c_str());
      exit(1);
    }
    source = calls->Find(spec);
    unlink((dir + "/reading.proto").c_str());
    rmdir(dir.c_str());
  }
};

Fixture& F() {
  static Fixture* f = new Fixture;
  return *f;
}

void BM_Build(benchmark::State& state) {
  std::unique_ptr<google::protobuf::Message> m = F().source->NewMessage();
  uint64_t seq = 0;
  for (auto _ : state) {
    F().source->Build(seq++, 1, m.get());
    benchmark::DoNotOptimize(m.get());
  }
}
BENCHMARK(BM_Build);

void BM_BuildAndSerialize(benchmark::State& state) {
  std::unique_ptr<google::protobuf::Message> m = F().source->NewMessage();
  uint64_t seq = 0;
  size_t bytes = 0;
  for (auto _ : state) {
    F().source->Build(seq++, 1, m.get());
    const size_t n = m->ByteSizeLong();
    grpc::Slice slice(n);
    m->SerializeWithCachedSizesToArray(const_cast<uint8_t*>(slice.begin()));
    benchmark::DoNotOptimize(slice.begin());
    bytes += n;
  }
  state.counters["bytes_per_request"] =
      benchmark::Counter(static_cast<double>(bytes) / static_cast<double>(state.iterations()));
}
BENCHMARK(BM_BuildAndSerialize);

}  // namespace

BENCHMARK_MAIN();
