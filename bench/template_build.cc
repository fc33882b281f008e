// Issue 26 goal: building one request from a --data template for a 10-field
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

// Ten fields: numbers, strings, an enum, a nested message, repeated ones.
constexpr char kProto[] = R"(
syntax = "proto3";
package bench.v1;
enum Kind { KIND_UNSPECIFIED = 0; BOOK = 1; TOY = 2; }
message Item { string sku = 1; int32 qty = 2; Kind kind = 3; }
message Order {
  uint64 id = 1;
  string customer = 2;
  Item item = 3;
  repeated string tags = 4;
  double price = 5;
  bool gift = 6;
  int64 big = 7;
  Kind kind = 8;
  string note = 9;
  uint32 shard = 10;
}
message Receipt { uint64 id = 1; }
service Cart { rpc Add(Order) returns (Receipt); }
)";

// Seven of the ten templated (numbers, strings, nested, repeated), three
// literal: what a realistic --data looks like.
constexpr char kTemplate[] =
    R"({"id": {{seq}}, "customer": "user-{{seq}}-{{rand_str 8}}",
        "item": {"sku": "S{{rand_int 1 9999}}", "qty": {{rand_int 1 9}}, "kind": "TOY"},
        "tags": ["fixed", "t{{seq}}"], "price": 9.5, "gift": true,
        "big": {{rand_int 0 1000000000000}}, "kind": "BOOK", "note": "a literal note",
        "shard": {{rand_int 0 63}}})";

struct Fixture {
  std::string dir;
  std::unique_ptr<rsslab::ProtoCatalog> catalog;
  std::unique_ptr<rsslab::CallSet> calls;
  std::shared_ptr<const rsslab::RequestSource> source;
  rsslab::v1::LoadSpec spec;

  Fixture() {
    char tmpl[] = "/tmp/rsslab-template-bench.XXXXXX";
    dir = mkdtemp(tmpl);
    std::ofstream(dir + "/order.proto") << kProto;
    auto c = rsslab::ProtoCatalog::Load({dir + "/order.proto"}, {});
    if (!c.ok()) {
      fprintf(stderr, "%s\n", std::string(c.status().message()).c_str());
      exit(1);
    }
    catalog = *std::move(c);
    calls = std::make_unique<rsslab::CallSet>(catalog.get());
    spec.set_call("bench.v1.Cart/Add");
    spec.set_data(kTemplate);
    if (absl::Status s = calls->Add(spec); !s.ok()) {
      fprintf(stderr, "%s\n", std::string(s.message()).c_str());
      exit(1);
    }
    source = calls->Find(spec);
    unlink((dir + "/order.proto").c_str());
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
