#include "agent/commands.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"

namespace rsslab {
namespace commands {
namespace {

bool IsName(absl::string_view n) {
  if (n.empty() || n.size() > 64) return false;
  for (char c : n) {
    if (!absl::ascii_isalnum(c) && c != '_' && c != '.' && c != '-') return false;
  }
  return true;
}

// NAME=VALUE, NAME checked.
absl::Status Split(absl::string_view flag, absl::string_view item, std::string* name,
                   std::string* value) {
  const size_t eq = item.find('=');
  if (eq == absl::string_view::npos || !IsName(item.substr(0, eq))) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, "=", item.substr(0, 200),
                                                   ": want NAME=", flag == "allow_command" ? "PATH" : "VALUE",
                                                   " with NAME [A-Za-z0-9_.-]+"));
  }
  *name = std::string(item.substr(0, eq));
  *value = std::string(item.substr(eq + 1));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::map<std::string, Command>> Parse(const std::vector<std::string>& allow,
                                                     const std::vector<std::string>& args,
                                                     const std::vector<std::string>& ready) {
  std::map<std::string, Command> out;
  if (allow.size() > 64) return absl::InvalidArgumentError("--allow_command: more than 64");
  for (const std::string& item : allow) {
    Command c;
    std::string path;
    if (absl::Status s = Split("allow_command", item, &c.name, &path); !s.ok()) return s;
    char buf[PATH_MAX];
    struct stat st;
    if (path.empty() || path[0] != '/' || realpath(path.c_str(), buf) == nullptr ||
        stat(buf, &st) != 0 || !S_ISREG(st.st_mode) || access(buf, X_OK) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--allow_command=", item, ": the path must be an absolute path to an executable file"));
    }
    c.path = buf;
    if (!out.emplace(c.name, c).second) {
      return absl::InvalidArgumentError(absl::StrCat("--allow_command: ", c.name, " given twice"));
    }
  }
  for (const std::string& item : args) {
    std::string name, text;
    if (absl::Status s = Split("allow_command_args", item, &name, &text); !s.ok()) return s;
    auto it = out.find(name);
    if (it == out.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--allow_command_args: no --allow_command named ", name));
    }
    if (text.size() > 4096) {
      return absl::InvalidArgumentError("--allow_command_args: longer than 4096 characters");
    }
    it->second.args = absl::StrSplit(text, ' ', absl::SkipEmpty());
    // Only the agent's own numbers go in: anything else in braces is a typo.
    std::string rest = absl::StrReplaceAll(
        text, {{"{threads}", ""}, {"{port}", ""}, {"{control_port}", ""}, {"{host}", ""}});
    if (rest.find('{') != std::string::npos || rest.find('}') != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--allow_command_args=", item.substr(0, 200),
          ": placeholders are {threads}, {port}, {control_port} and {host}"));
    }
    it->second.uses_port = text.find("{port}") != std::string::npos;
    it->second.uses_control_port = text.find("{control_port}") != std::string::npos;
  }
  for (const std::string& item : ready) {
    std::string name, re;
    if (absl::Status s = Split("allow_command_ready", item, &name, &re); !s.ok()) return s;
    auto it = out.find(name);
    if (it == out.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--allow_command_ready: no --allow_command named ", name));
    }
    if (re.empty() || re.size() > 256) {
      return absl::InvalidArgumentError("--allow_command_ready: a line prefix of 1..256 characters");
    }
    it->second.ready_prefix = re;
  }
  for (const auto& [name, c] : out) {
    if (c.ready_prefix.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--allow_command=", name, ": give --allow_command_ready=", name,
          "=PREFIX, the start of the line the program prints once it serves"));
    }
    if (!c.uses_port) {
      // The loadgen needs the program's address, and the agent a way to
      // know it listens: {port} is how both are known.
      return absl::InvalidArgumentError(absl::StrCat(
          "--allow_command=", name, ": its --allow_command_args template must pass {port} (the "
          "port the agent picks and the loadgen sends to), e.g. --allow_command_args=", name,
          "=\"--port={port} --threads={threads}\""));
    }
  }
  return out;
}

std::vector<std::string> Expand(const Command& c, const Values& v) {
  std::vector<std::string> out;
  for (const std::string& a : c.args) {
    out.push_back(absl::StrReplaceAll(a, {{"{threads}", absl::StrCat(v.threads)},
                                          {"{port}", absl::StrCat(v.port)},
                                          {"{control_port}", absl::StrCat(v.control_port)},
                                          {"{host}", v.host}}));
  }
  return out;
}

absl::StatusOr<int> PickFreePort(const std::string& host) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  if (inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("commands need an IPv4 server host, not ", host));
  }
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError("socket failed");
  socklen_t len = sizeof(a);
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  close(fd);
  if (!ok) return absl::InternalError(absl::StrCat("cannot bind ", host, ":0"));
  return ntohs(a.sin_port);
}


}  // namespace commands
}  // namespace rsslab
