// Scraping a Prometheus endpoint from a test: one raw HTTP exchange and a
// strict parser of the text exposition format, shared by the server's and
// the loadgen's metrics tests.
//
// Example:
//   std::string resp = Http("127.0.0.1:9464", "GET /metrics HTTP/1.1\r\n\r\n");
//   std::map<std::string, double> m = ParseExposition(Body(resp));
//   m["rsslab_requests_total{phase=\"fill\"}"]

#ifndef RSSLAB_TESTS_SCRAPE_H_
#define RSSLAB_TESTS_SCRAPE_H_

#include <map>
#include <string>

namespace rsslab {
namespace testing {

// One HTTP exchange with HOST:PORT (IPv4); returns everything received.
std::string Http(const std::string& address, const std::string& request);

// Parsed exposition: sample "name{labels}" -> value. Fails the test on any
// line that is not HELP, TYPE or `name{labels} value`, on a sample whose
// family has no HELP/TYPE before it, and on a family typed twice.
std::map<std::string, double> ParseExposition(const std::string& body);

// The body of an HTTP response ("" without a header end).
std::string Body(const std::string& response);

}  // namespace testing
}  // namespace rsslab

#endif  // RSSLAB_TESTS_SCRAPE_H_
