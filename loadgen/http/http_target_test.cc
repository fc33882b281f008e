#include "loadgen/http/http_target.h"

#include <cstdio>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rsslab {
namespace http {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

TargetSpec Url(const std::string& url) {
  TargetSpec s;
  s.url = url;
  return s;
}

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = std::string(getenv("TEST_TMPDIR")) + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(HttpTarget, TemplatesExpandPerRequest) {
  TargetSpec spec = Url("http://127.0.0.1:8000/items/{{seq}}?q={{rand_int 5 5}}");
  spec.headers = {"X-Id: id-{{seq}}", "Content-Type: application/json"};
  spec.body = R"({"n": {{seq}}, "s": "{{rand_str 4}}"})";
  absl::StatusOr<Target> t = ParseTarget(spec);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_FALSE(t->fixed());
  EXPECT_EQ(t->describe(), "POST /items/{{seq}}?q={{rand_int 5 5}}");
  Request r;
  t->Build(7, 1, &r);
  EXPECT_EQ(*r.method, "POST");
  EXPECT_EQ(r.url, "http://127.0.0.1:8000/items/7?q=5");
  EXPECT_EQ(r.headers[0], "X-Id: id-7");
  EXPECT_EQ(r.headers[1], "Content-Type: application/json");
  EXPECT_THAT(r.body, StartsWith(R"({"n": 7, "s": ")"));
  EXPECT_EQ(r.body.size(), std::string(R"({"n": 7, "s": "abcd"})").size());
  Request again;
  t->Build(7, 1, &again);  // the same seed and seq: the same request
  EXPECT_EQ(again.body, r.body);
}

TEST(HttpTarget, FixedRequestAndDefaults) {
  absl::StatusOr<Target> t = ParseTarget(Url("http://localhost:80"));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(t->fixed());
  EXPECT_EQ(t->base(), "http://localhost:80");
  EXPECT_EQ(t->describe(), "GET /");
  Target other = t->WithBase("127.0.0.1", 9000);
  Request r;
  other.Build(0, 1, &r);
  EXPECT_EQ(r.url, "http://127.0.0.1:9000/");
  EXPECT_FALSE(r.has_body);
}

TEST(HttpTarget, BadInputNamesTheFlag) {
  auto err = [](TargetSpec s) { return std::string(ParseTarget(s).status().message()); };
  EXPECT_THAT(err(Url("https://h:443/")), HasSubstr("https is not supported"));
  EXPECT_THAT(err(Url("http://h/")), HasSubstr("want an explicit port"));
  EXPECT_THAT(err(Url("http://u@h:1/")), HasSubstr("no user@ part"));
  EXPECT_THAT(err(Url("http://h:1/{{nope}}")), HasSubstr("unknown placeholder"));
  TargetSpec v = Url("http://h:1/");
  v.version = "3";
  EXPECT_THAT(err(v), HasSubstr("--http_version=3: want 1.1 or h2c"));
  TargetSpec h = Url("http://h:1/");
  h.headers = {"no colon here"};
  EXPECT_THAT(err(h), HasSubstr("want Name: value"));
  h.headers = {"X-A: line\r\nInjected: 1"};
  EXPECT_THAT(err(h), HasSubstr("printable"));
  TargetSpec m = Url("http://h:1/");
  m.method = "get";
  EXPECT_THAT(err(m), HasSubstr("not an upper-case token"));
}

TEST(HttpTarget, RequestsFileLinesInTurn) {
  TargetSpec spec = Url("http://h:1");
  spec.requests_file = WriteFile("reqs.txt",
                                 "# comment\n\nGET /a/{{seq}}\r\nPOST /b {\"x\": {{seq}}}\n");
  absl::StatusOr<Target> t = ParseTarget(spec);
  ASSERT_TRUE(t.ok()) << t.status();
  Request r;
  t->Build(0, 1, &r);
  EXPECT_EQ(*r.method, "GET");
  EXPECT_EQ(r.url, "http://h:1/a/0");
  t->Build(1, 1, &r);
  EXPECT_EQ(*r.method, "POST");
  EXPECT_EQ(r.url, "http://h:1/b");
  EXPECT_EQ(r.body, "{\"x\": 1}");
  t->Build(2, 1, &r);
  EXPECT_EQ(r.url, "http://h:1/a/2");
}

TEST(HttpTarget, RequestsFileErrorsNameTheLine) {
  TargetSpec spec = Url("http://h:1");
  spec.requests_file = WriteFile("bad.txt", "GET /ok\nGET\n");
  EXPECT_THAT(std::string(ParseTarget(spec).status().message()),
              HasSubstr("bad.txt:2: want METHOD PATH [BODY]"));
  spec.requests_file = WriteFile("empty.txt", "# nothing\n");
  EXPECT_THAT(std::string(ParseTarget(spec).status().message()), HasSubstr("holds no request"));
  spec.requests_file = "/dev/zero";
  EXPECT_THAT(std::string(ParseTarget(spec).status().message()), HasSubstr("not a regular file"));
  spec.requests_file = WriteFile("ok.txt", "GET /\n");
  spec.body = "x";
  EXPECT_THAT(std::string(ParseTarget(spec).status().message()), HasSubstr("drop --method"));
}

}  // namespace
}  // namespace http
}  // namespace rsslab
