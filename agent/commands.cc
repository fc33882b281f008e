#include "agent/commands.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/untrusted_text.h"
#include "common/listen.h"

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

// NAME=VALUE for a command already given by --allow_command: the command.
absl::StatusOr<Command*> Named(absl::string_view flag, absl::string_view item,
                               std::map<std::string, Command>* out, std::string* value) {
  std::string name;
  if (absl::Status s = Split(flag, item, &name, value); !s.ok()) return s;
  auto it = out->find(name);
  if (it == out->end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": no --allow_command named ", name));
  }
  return &it->second;
}

bool IsIpOrLocalhost(const std::string& h) {
  in6_addr a;
  return h == "localhost" || inet_pton(AF_INET, h.c_str(), &a) == 1 ||
         inet_pton(AF_INET6, h.c_str(), &a) == 1;
}

// HOST (port 0: any) or HOST:PORT, an IP literal or localhost.
absl::StatusOr<HostPort> ControlAllowed(absl::string_view a) {
  HostPort hp;
  hp.host = std::string(absl::StripPrefix(absl::StripSuffix(a, "]"), "["));
  if (IsIpOrLocalhost(hp.host)) return hp;
  absl::StatusOr<HostPort> parsed = ParseHostPort(a);
  if (parsed.ok() && IsIpOrLocalhost(parsed->host) && parsed->port > 0) return *parsed;
  return absl::InvalidArgumentError(
      absl::StrCat("'", Echo(a, 64), "' is not HOST or HOST:PORT with HOST an IP address"));
}

bool SameHost(absl::string_view a, absl::string_view b) {
  in6_addr x, y;
  for (int af : {AF_INET, AF_INET6}) {
    if (inet_pton(af, std::string(a).c_str(), &x) == 1 &&
        inet_pton(af, std::string(b).c_str(), &y) == 1) {
      return memcmp(&x, &y, af == AF_INET ? 4 : 16) == 0;
    }
  }
  return a == b;
}

}  // namespace

std::string JoinQuoted(const std::vector<std::string>& words) {
  std::vector<std::string> out;
  for (const std::string& w : words) {
    const bool plain = !w.empty() && std::all_of(w.begin(), w.end(), [](char ch) {
      return absl::ascii_isalnum(ch) || std::strchr("-_=.,:/+@%", ch) != nullptr;
    });
    out.push_back(plain ? w : absl::StrCat("'", absl::StrReplaceAll(w, {{"'", "'\\''"}}), "'"));
  }
  return absl::StrJoin(out, " ");
}

absl::StatusOr<std::vector<TemplateWord>> SplitTemplate(absl::string_view text) {
  std::vector<TemplateWord> words;
  TemplateWord word;
  bool in_word = false;  // a word has begun ('' begins an empty one)
  auto piece = [&](std::string t, bool expand) {
    in_word = true;
    if (!word.parts.empty() && word.parts.back().expand == expand) {
      word.parts.back().text += t;
    } else {
      word.parts.push_back({std::move(t), expand});
    }
  };
  auto at = [](size_t i) { return absl::StrCat(" at character ", i + 1); };
  for (size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (ch != '\t' && absl::ascii_iscntrl(static_cast<unsigned char>(ch))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a control character (byte ", static_cast<int>(static_cast<unsigned char>(ch)), ")",
          at(i), "; a template is one line"));
    }
    if (ch == ' ' || ch == '\t') {
      if (in_word) words.push_back(std::move(word));
      word = TemplateWord();
      in_word = false;
    } else if (ch == '\'') {
      const size_t end = text.find('\'', i + 1);
      if (end == absl::string_view::npos) {
        return absl::InvalidArgumentError(absl::StrCat("a single quote", at(i), " is never closed"));
      }
      piece(std::string(text.substr(i + 1, end - i - 1)), /*expand=*/false);
      i = end;
    } else if (ch == '"') {
      std::string t;
      size_t j = i + 1;
      for (; j < text.size() && text[j] != '"'; ++j) {
        if (text[j] == '\\' && j + 1 < text.size() && (text[j + 1] == '"' || text[j + 1] == '\\')) {
          ++j;
        }
        t += text[j];
      }
      if (j >= text.size()) {
        return absl::InvalidArgumentError(absl::StrCat("a double quote", at(i), " is never closed"));
      }
      piece(std::move(t), /*expand=*/true);
      i = j;
    } else if (ch == '\\') {
      if (i + 1 >= text.size()) {
        return absl::InvalidArgumentError("a backslash at the end escapes nothing");
      }
      piece(std::string(1, text[++i]), /*expand=*/false);  // literal, braces too
    } else {
      piece(std::string(1, ch), /*expand=*/true);
    }
  }
  if (in_word) words.push_back(std::move(word));
  return words;
}

namespace {

// --allow_command_args=NAME=TEMPLATE: the words of NAME's arguments.
absl::Status AddTemplate(const std::string& item, std::map<std::string, Command>* out_map) {
  std::map<std::string, Command>& out = *out_map;
  std::string text;
  absl::StatusOr<Command*> c = Named("allow_command_args", item, &out, &text);
  if (!c.ok()) return c.status();
  if (text.size() > 4096) {
    return absl::InvalidArgumentError("--allow_command_args: longer than 4096 characters");
  }
  absl::StatusOr<std::vector<TemplateWord>> words = SplitTemplate(text);
  if (!words.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--allow_command_args=", Echo(item, 200), ": ", words.status().message()));
  }
  (*c)->args = *std::move(words);
  // Only the agent's own numbers go in: anything else in braces outside
  // single quotes is a typo.
  std::string expanded;
  for (const TemplateWord& w : (*c)->args) {
    for (const TemplateWord::Part& p : w.parts) {
      if (p.expand) absl::StrAppend(&expanded, p.text, " ");
    }
  }
  std::string rest = absl::StrReplaceAll(
      expanded, {{"{threads}", ""}, {"{port}", ""}, {"{control_port}", ""}, {"{host}", ""}});
  if (rest.find('{') != std::string::npos || rest.find('}') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--allow_command_args=", Echo(item, 200),
        ": placeholders are {threads}, {port}, {control_port} and {host} (put literal braces "
        "in single quotes)"));
  }
  (*c)->uses_port = expanded.find("{port}") != std::string::npos;
  (*c)->uses_control_port = expanded.find("{control_port}") != std::string::npos;
  return absl::OkStatus();
}

// --allow_command_control=NAME=HOST[:PORT],...
absl::Status AddControl(const std::string& item, std::map<std::string, Command>* out_map) {
  std::map<std::string, Command>& out = *out_map;
  std::string list;
  absl::StatusOr<Command*> c = Named("allow_command_control", item, &out, &list);
  if (!c.ok()) return c.status();
  if (list.size() > 1024) {
    return absl::InvalidArgumentError("--allow_command_control: longer than 1024 characters");
  }
  for (absl::string_view a : absl::StrSplit(list, ',', absl::SkipEmpty())) {
    if (absl::StatusOr<HostPort> hp = ControlAllowed(a); hp.ok()) {
      (*c)->control_allowed.push_back(*hp);
    } else {
      return absl::InvalidArgumentError(absl::StrCat("--allow_command_control=", Echo(item, 200),
                                                     ": ", hp.status().message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::map<std::string, Command>> Parse(const std::vector<std::string>& allow,
                                                     const std::vector<std::string>& args,
                                                     const std::vector<std::string>& ready,
                                                     const std::vector<std::string>& ready_port,
                                                     const std::vector<std::string>& control) {
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
    if (absl::Status s = AddTemplate(item, &out); !s.ok()) return s;
  }
  std::map<std::string, bool> port_given;
  for (const std::string& item : ready) {
    std::string re;
    absl::StatusOr<Command*> c = Named("allow_command_ready", item, &out, &re);
    if (!c.ok()) return c.status();
    if (re.empty() || re.size() > 256) {
      return absl::InvalidArgumentError(
          "--allow_command_ready: a regex of 1..256 characters (RE2 syntax)");
    }
    absl::StatusOr<launch::LineMatch> m = launch::LineMatch::Regex(re);
    if (!m.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--allow_command_ready=", item, ": ", m.status().message()));
    }
    (*c)->ready_line = *std::move(m);
  }
  for (const std::string& item : ready_port) {
    std::string which;
    absl::StatusOr<Command*> c = Named("allow_command_ready_port", item, &out, &which);
    if (!c.ok()) return c.status();
    if (which != "{port}" && which != "{control_port}") {
      return absl::InvalidArgumentError(absl::StrCat(
          "--allow_command_ready_port=", item.substr(0, 200),
          ": name the template's port that must accept a connection, {port} or {control_port}"));
    }
    (*c)->ready_port =
        which == "{port}" ? Command::ReadyPort::kPort : Command::ReadyPort::kControlPort;
    port_given[(*c)->name] = true;
  }
  for (const std::string& item : control) {
    if (absl::Status s = AddControl(item, &out); !s.ok()) return s;
  }
  for (auto& [name, c] : out) {
    if (!c.uses_port) {
      // The loadgen needs the program's address, and the agent a way to
      // know it listens: {port} is how both are known.
      return absl::InvalidArgumentError(absl::StrCat(
          "--allow_command=", name, ": its --allow_command_args template must pass {port} (the "
          "port the agent picks and the loadgen sends to), e.g. --allow_command_args=", name,
          "=\"--port={port} --threads={threads}\""));
    }
    if (c.ready_port == Command::ReadyPort::kControlPort && !c.uses_control_port) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--allow_command_ready_port=", name, "={control_port}: its --allow_command_args "
          "template does not pass {control_port}"));
    }
    // Neither a line nor a port named: ready when {port} accepts.
    if (c.ready_line.empty() && !port_given[name]) c.ready_port = Command::ReadyPort::kPort;
  }
  return out;
}

std::vector<std::string> Expand(const Command& c, const Values& v) {
  std::vector<std::string> out;
  for (const TemplateWord& w : c.args) {
    std::string word;
    for (const TemplateWord::Part& p : w.parts) {
      if (!p.expand) {
        word += p.text;
        continue;
      }
      absl::StrAppend(&word, absl::StrReplaceAll(p.text, {{"{threads}", absl::StrCat(v.threads)},
                                                          {"{port}", absl::StrCat(v.port)},
                                                          {"{control_port}", absl::StrCat(v.control_port)},
                                                          {"{host}", v.host}}));
    }
    out.push_back(std::move(word));
  }
  return out;
}

absl::StatusOr<const Command*> Lookup(const std::map<std::string, Command>& allowed,
                                      absl::string_view name, absl::string_view who) {
  auto it = allowed.find(std::string(name));
  if (it != allowed.end()) return &it->second;
  std::vector<std::string> names;
  for (const auto& [n, c] : allowed) names.push_back(n);
  return absl::NotFoundError(absl::StrCat("command '", Echo(name, 64), "' is not one ", who,
                                          " was started with (--allow_command: ",
                                          names.empty() ? "none" : absl::StrJoin(names, ", "),
                                          ")"));
}

absl::Status Configure(const Command& c, const std::string& host, int threads,
                       launch::LaunchOptions* lo, Values* values) {
  values->threads = threads;
  values->host = host;
  absl::StatusOr<int> port = PickFreePort(host);
  if (!port.ok()) return port.status();
  values->port = *port;
  if (c.uses_control_port) {
    absl::StatusOr<int> cport = PickFreePort(host);
    if (!cport.ok()) return cport.status();
    values->control_port = *cport;
  }
  lo->program = c.path;
  lo->fixed_args = Expand(c, *values);
  lo->flags.clear();
  lo->flag_check = launch::LaunchOptions::FlagCheck::kNone;
  lo->ready_match = c.ready_line;
  lo->ready_host = host;
  switch (c.ready_port) {
    case Command::ReadyPort::kPort:
      lo->ready_port = values->port;
      break;
    case Command::ReadyPort::kControlPort:
      lo->ready_port = values->control_port;
      break;
    case Command::ReadyPort::kNone:
      lo->ready_port = 0;
      break;
  }
  lo->verify = launch::Verify::kProfileOnly;
  return absl::OkStatus();
}

absl::Status Addresses(const Command& c, const Values& v, const std::string& ready_line,
                       std::string* data, std::string* control) {
  *data = JoinHostPort(v.host, v.port);
  control->clear();
  if (v.control_port > 0) *control = JoinHostPort(v.host, v.control_port);
  if (!c.ready_line.HasGroup("control")) return absl::OkStatus();
  // The program's own word: bounded and HOST:PORT before anyone dials it.
  const std::string got = c.ready_line.Group(ready_line, "control");
  const size_t colon = got.rfind(':');
  const bool ok = !got.empty() && got.size() <= 255 && colon != std::string::npos &&
                  colon > 0 && colon + 1 < got.size() &&
                  got.find_first_not_of("0123456789", colon + 1) == std::string::npos &&
                  std::all_of(got.begin(), got.end(), [](char ch) { return absl::ascii_isgraph(ch); });
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        "command ", c.name, ": its ready line's control group is not HOST:PORT: '", Echo(got, 64),
        "'"));
  }
  absl::StatusOr<HostPort> hp = ParseHostPort(got);
  bool allowed = hp.ok() && IsLoopback(hp->host);
  for (const HostPort& a : c.control_allowed) {
    allowed |= hp.ok() && SameHost(a.host, hp->host) && (a.port == 0 || a.port == hp->port);
  }
  if (!allowed) {
    std::vector<std::string> listed;
    for (const HostPort& a : c.control_allowed) {
      listed.push_back(a.port == 0 ? a.host : JoinHostPort(a.host, a.port));
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "command ", c.name, ": its ready line's Control address '", Echo(got, 64),
        "' is neither on loopback nor one --allow_command_control=", c.name, "=... allows (",
        listed.empty() ? "none given" : absl::StrJoin(listed, ","), ")"));
  }
  *control = got;
  return absl::OkStatus();
}

absl::Status AddressesOrStop(const Command& c, const Values& v, launch::Started& started,
                             std::string* data, std::string* control) {
  absl::Status a = Addresses(c, v, started.ready_line, data, control);
  if (a.ok()) return a;
  launch::StopStarted(started, absl::Seconds(5));
  return absl::Status(a.code(), absl::StrCat(a.message(), "; stopped it (pid ", started.pid, ")"));
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
