#include "loadgen/http/http_flags.h"

#include <utility>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/flags_parse.h"

ABSL_FLAG(std::string, http_version, "",
          "HTTP load (an http:// --target): 1.1 (keep-alive, the default) or h2c (HTTP/2 "
          "cleartext, prior knowledge).");
ABSL_FLAG(uint32_t, connections, 0,
          "HTTP load: connections to the server (default 4); HTTP/1.1 carries one request at a "
          "time on each.");
ABSL_FLAG(std::string, method, "", "HTTP load: the request method (default GET, POST with --body).");
ABSL_FLAG(std::string, header, "",
          "HTTP load: a request header, Name: value (repeatable; the value may hold --data's "
          "placeholders).");
ABSL_FLAG(std::string, body, "",
          "HTTP load: the request body, a template with --data's placeholders ({{seq}}, "
          "{{rand_int A B}}, {{rand_str N}}).");
ABSL_FLAG(std::string, requests_file, "",
          "HTTP load: requests replayed in turn, one a line: METHOD PATH [BODY] (templates; "
          "# comments).");
ABSL_FLAG(bool, follow_redirects, false,
          "HTTP load: follow 3xx redirects (at most 5, http only); otherwise a 3xx fails its "
          "request.");

namespace rsslab {
namespace http {

absl::Status ApplyHttpFlags(const std::string& target, rsslab::v1::LoadSpec* flags) {
  const bool http = IsHttpUrl(target);
  const uint32_t conns = absl::GetFlag(FLAGS_connections);
  if (!http) {
    std::vector<std::string> given;
    if (!absl::GetFlag(FLAGS_http_version).empty()) given.push_back("--http_version");
    if (conns > 0) given.push_back("--connections");
    if (!absl::GetFlag(FLAGS_method).empty()) given.push_back("--method");
    if (!absl::GetFlag(FLAGS_header).empty()) given.push_back("--header");
    if (!absl::GetFlag(FLAGS_body).empty()) given.push_back("--body");
    if (!absl::GetFlag(FLAGS_requests_file).empty()) given.push_back("--requests_file");
    if (absl::GetFlag(FLAGS_follow_redirects)) given.push_back("--follow_redirects");
    if (!given.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(absl::StrJoin(given, ", "),
                       ": HTTP load only; give an HTTP server as --target=http://HOST:PORT/PATH"));
    }
    return absl::OkStatus();
  }
  if (conns > 0 && flags->channels() > 0) {
    return absl::InvalidArgumentError(
        "--connections and --channels both set: for HTTP load use --connections");
  }
  if (conns > 0) flags->set_channels(conns);
  const bool h11 = absl::GetFlag(FLAGS_http_version) != "h2c";
  if (h11 && flags->concurrency() == 0 && flags->rate() == 0) {
    // One request in flight per connection (--channels counts as well).
    const uint32_t n = flags->channels() > 0 ? flags->channels() : 4;
    flags->set_channels(n);
    flags->set_concurrency(n);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const Target>> LoadHttpFlags(const std::string& url,
                                                            const std::vector<std::string>& argv) {
  if (!IsHttpUrl(url)) return std::shared_ptr<const Target>();
  TargetSpec spec;
  spec.url = url;
  spec.version = absl::GetFlag(FLAGS_http_version).empty() ? "1.1"
                                                           : absl::GetFlag(FLAGS_http_version);
  spec.method = absl::GetFlag(FLAGS_method);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  // Each occurrence whole (a value may hold commas); absl keeps only the last.
  spec.headers = RepeatedFlagValues(static_cast<int>(args.size()), args.data(), "header");
  spec.body = absl::GetFlag(FLAGS_body);
  spec.requests_file = absl::GetFlag(FLAGS_requests_file);
  spec.follow_redirects = absl::GetFlag(FLAGS_follow_redirects);
  absl::StatusOr<Target> t = ParseTarget(spec);
  if (!t.ok()) return t.status();
  return std::make_shared<const Target>(*std::move(t));
}

}  // namespace http
}  // namespace rsslab
