// How a launcher tells a started program is ready: a line of its output
// (a fixed prefix, rsslab_server's ready line, or an operator's regex), or
// a TCP port that accepts connections. Used by the one launch path
// (agent/launch.h) and its output pump (agent/output_pump.h).
//
//   absl::StatusOr<rsslab::launch::LineMatch> m =
//       rsslab::launch::LineMatch::Regex(R"(^shop ready .*control=(?P<control>\S+))");
//   if (!m.ok()) ...                                    // RE2's own error, one line
//   if (m->Matches(line)) {
//     std::string control = m->Group(line, "control");  // "" without such a group
//   }
//   bool up = rsslab::launch::PortAccepts("127.0.0.1", 41234, absl::Milliseconds(200));
#ifndef RSSLAB_AGENT_READINESS_H_
#define RSSLAB_AGENT_READINESS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace re2 {
class RE2;
}

namespace rsslab {
namespace launch {

// Which output line is the ready line. Default-constructed: none (the
// program's readiness is known otherwise, e.g. by its port). Copies share
// the compiled pattern (RE2 is safe to match from several threads).
class LineMatch {
 public:
  LineMatch() = default;
  // A line starting with `prefix`.
  static LineMatch Prefix(absl::string_view prefix);
  // A line in which RE2 `pattern` is found (anchor with ^ for the start).
  // INVALID_ARGUMENT with RE2's message for a bad pattern. Matching takes
  // time linear in the line (RE2), whatever the program prints.
  static absl::StatusOr<LineMatch> Regex(absl::string_view pattern);

  bool empty() const { return prefix_.empty() && re_ == nullptr; }
  bool Matches(absl::string_view line) const;
  // The named group `name` ((?P<name>...)) where the pattern matches
  // `line`; "" when the pattern has no such group or does not match.
  std::string Group(absl::string_view line, absl::string_view name) const;
  bool HasGroup(absl::string_view name) const;
  // For messages: `a line starting with "x"`, `a line matching /x/`.
  std::string Describe() const;

 private:
  std::string prefix_;
  std::shared_ptr<const re2::RE2> re_;
};

// A TCP connection to host:port (IPv4 or IPv6 literal) is accepted within
// `timeout`; the connection is closed at once.
bool PortAccepts(const std::string& host, int port, absl::Duration timeout);

}  // namespace launch
}  // namespace rsslab

#endif  // RSSLAB_AGENT_READINESS_H_
