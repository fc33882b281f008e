// deploy/grafana/rsslab.json against real scrapes: every metric the
// dashboard queries (panels and template variables) is exposed by a real
// rsslab_server (glibc, after a run with a trim; and under jemalloc, whose
// allocator figures glibc lacks) or a real rsslab_loadgen (after its run),
// and every label a query groups by is on some exposed sample. The JSON's
// shape is checked too (unique panel ids, a datasource and refIds on every
// query), and the scrape config names both jobs.
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/loadgen_it/loadgen_testing.h"
#include "tests/scrape.h"
#include "tests/server_process.h"

namespace rsslab {
namespace {

using ::google::protobuf::Value;
using ::rsslab::testing::Body;
using ::rsslab::testing::Child;
using ::rsslab::testing::Http;
using ::rsslab::testing::Loadgen;
using ::rsslab::testing::ParseExposition;
using ::rsslab::testing::ReadFile;
using ::rsslab::testing::ServerProcess;
using ::rsslab::testing::Tmp;
using ::testing::HasSubstr;

// Every query string: targets' "expr", variables' "query"/"definition".
void Queries(const Value& v, const std::string& key, std::vector<std::string>* out) {
  if (v.has_struct_value()) {
    for (const auto& [k, child] : v.struct_value().fields()) Queries(child, k, out);
  } else if (v.has_list_value()) {
    for (const Value& child : v.list_value().values()) Queries(child, key, out);
  } else if (v.kind_case() == Value::kStringValue &&
             (key == "expr" || key == "query" || key == "definition")) {
    out->push_back(v.string_value());
  }
}

// Sample names ("name" of "name{labels}") and label names of a scrape.
void Exposed(const std::string& address, std::set<std::string>* names,
             std::set<std::string>* labels) {
  const std::string resp = Http(address, "GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n");
  ASSERT_THAT(resp, HasSubstr("200 OK")) << address;
  static const std::regex kLabel("([a-zA-Z_][a-zA-Z0-9_]*)=\"");
  for (const auto& [sample, value] : ParseExposition(Body(resp))) {
    const size_t brace = sample.find('{');
    names->insert(sample.substr(0, brace));
    if (brace == std::string::npos) continue;
    const std::string l = sample.substr(brace);
    for (std::sregex_iterator it(l.begin(), l.end(), kLabel), end; it != end; ++it) {
      labels->insert((*it)[1]);
    }
  }
}

std::unique_ptr<ServerProcess> Server(std::map<std::string, std::string> env = {}) {
  ServerProcess::Options o;
  o.binary = ServerProcess::Runfile("server/rsslab_server");
  o.args = {"--listen=127.0.0.1:0", "--control_listen=127.0.0.1:0",
            "--metrics_listen=127.0.0.1:0", "--threads=2",
            "--handler=" + ServerProcess::Runfile("server/handlers/web_worker.py")};
  o.env = std::move(env);
  auto s = ServerProcess::Start(o);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

TEST(GrafanaDashboardTest, EveryQueriedMetricIsExposed) {
  Value dash;
  const std::string text = ReadFile(ServerProcess::Runfile("deploy/grafana/rsslab.json"));
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(text, &dash).ok());
  const auto& top = dash.struct_value().fields();
  ASSERT_TRUE(top.count("panels"));
  ASSERT_TRUE(top.count("templating"));

  // Shape: unique ids; every query panel names the datasource variable and
  // gives each query its own refId.
  std::set<double> ids;
  int queries = 0;
  for (const Value& p : top.at("panels").list_value().values()) {
    const auto& f = p.struct_value().fields();
    ASSERT_TRUE(f.count("id") && f.count("gridPos") && f.count("title"));
    EXPECT_TRUE(ids.insert(f.at("id").number_value()).second) << f.at("title").string_value();
    if (f.at("type").string_value() == "row") continue;
    EXPECT_EQ(f.at("datasource").struct_value().fields().at("uid").string_value(),
              "${datasource}");
    ASSERT_TRUE(f.count("targets")) << f.at("title").string_value();
    std::set<std::string> refs;
    for (const Value& t : f.at("targets").list_value().values()) {
      EXPECT_TRUE(refs.insert(t.struct_value().fields().at("refId").string_value()).second);
      ++queries;
    }
  }
  EXPECT_GT(queries, 40);

  std::vector<std::string> exprs;
  Queries(dash, "", &exprs);
  std::set<std::string> wanted, grouped;
  static const std::regex kMetric("rsslab_[a-zA-Z0-9_]+");
  static const std::regex kBy("by \\(([^)]*)\\)");
  for (const std::string& e : exprs) {
    for (std::sregex_iterator it(e.begin(), e.end(), kMetric), end; it != end; ++it) {
      wanted.insert(it->str());
    }
    for (std::sregex_iterator it(e.begin(), e.end(), kBy), end; it != end; ++it) {
      for (absl::string_view l : absl::StrSplit((*it)[1].str(), ',', absl::SkipWhitespace())) {
        grouped.insert(std::string(absl::StripAsciiWhitespace(l)));
      }
    }
  }
  EXPECT_GT(wanted.size(), 40u);

  // A real server through a run with every phase and a trim, scraped with
  // its loadgen's endpoint still held open.
  std::set<std::string> names, labels;
  auto server = Server();
  ASSERT_NE(server, nullptr);
  Child lg(Loadgen(), {"--builtin=quick", "--target=" + server->data_address(),
                       "--control=" + server->control_address(), "--out=" + Tmp("run"),
                       "--progress=none", "--metrics_listen=127.0.0.1:0", "--metrics_hold=60s"});
  ASSERT_TRUE(lg.WaitForStderr("run over", absl::Seconds(120))) << lg.Stderr();
  std::string lg_addr;
  for (absl::string_view line : absl::StrSplit(lg.Stderr(), '\n')) {
    if (absl::ConsumePrefix(&line, "rsslab_loadgen: metrics at http://")) {
      lg_addr = std::string(line.substr(0, line.find('/')));
    }
  }
  ASSERT_FALSE(lg_addr.empty()) << lg.Stderr();
  Exposed(lg_addr, &names, &labels);
  Exposed(server->metrics_address(), &names, &labels);
  lg.Kill();
  EXPECT_EQ(server->Stop(), 0);
  // jemalloc reports resident and active bytes, which glibc has no figure for.
#if defined(__SANITIZE_ADDRESS__)
  // Under ASan the server is instrumented, and ASan's runtime must be the
  // first library in a process: a preloaded jemalloc stops it at start
  // (docs/TESTING.md#sanitizers). Its two figures go unchecked there, and
  // so does glibc's allocated bytes: malloc is ASan's, whose mallinfo2
  // says 0, which the server leaves out rather than expose.
  wanted.erase("rsslab_allocator_allocated_bytes");
  wanted.erase("rsslab_allocator_resident_bytes");
  wanted.erase("rsslab_allocator_active_bytes");
#else
  auto je = Server({{"LD_PRELOAD", "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"}});
  ASSERT_NE(je, nullptr);
  Exposed(je->metrics_address(), &names, &labels);
  EXPECT_EQ(je->Stop(), 0);
#endif

  for (const std::string& m : wanted) {
    EXPECT_TRUE(names.count(m)) << "the dashboard queries " << m
                                << ", which no real scrape exposes";
  }
  // Prometheus adds instance and job; "le" is the histogram buckets'.
  labels.insert("instance");
  labels.insert("job");
  for (const std::string& l : grouped) {
    EXPECT_TRUE(labels.count(l)) << "the dashboard groups by \"" << l
                                 << "\", which no exposed sample has";
  }

  const std::string prom = ReadFile(ServerProcess::Runfile("deploy/grafana/prometheus.yml"));
  EXPECT_THAT(prom, HasSubstr("job_name: rsslab_server"));
  EXPECT_THAT(prom, HasSubstr("job_name: rsslab_loadgen"));
  EXPECT_THAT(prom, HasSubstr("metrics_path: /metrics"));
}

}  // namespace
}  // namespace rsslab
