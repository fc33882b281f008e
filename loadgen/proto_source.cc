#include "loadgen/proto_source.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/untrusted_text.h"
#include "common/files.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"

namespace rsslab {
namespace {

bool IsDir(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool Exists(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0;
}

std::string Join(const std::string& root, const std::string& name) {
  return root == "/" ? "/" + name : absl::StrCat(root, "/", name);
}

// A virtual name as protoc allows it: relative, no "." or ".." parts, no
// backslashes or empty parts (DiskSourceTree refuses the same).
bool IsCleanVirtual(absl::string_view name) {
  if (name.empty() || name[0] == '/' || absl::StrContains(name, '\\')) return false;
  for (absl::string_view part : absl::StrSplit(name, '/')) {
    if (part.empty() || part == "." || part == "..") return false;
  }
  return true;
}

}  // namespace

std::string AbsolutePath(const std::string& path) {
  std::string full = path;
  if (path.empty() || path[0] != '/') {
    char cwd[PATH_MAX];
    full = getcwd(cwd, sizeof(cwd)) != nullptr ? Join(cwd, path) : Join(".", path);
  }
  std::vector<absl::string_view> parts;
  for (absl::string_view part : absl::StrSplit(full, '/')) {
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      if (!parts.empty()) parts.pop_back();
      continue;
    }
    parts.push_back(part);
  }
  return "/" + absl::StrJoin(parts, "/");
}

int ProtoNestingDepth(absl::string_view text, int limit, int* line) {
  int depth = 0, deepest = 0, at = 1;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') {
      ++at;
    } else if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      while (i < text.size() && text[i] != '\n') ++i;
      --i;  // the newline is counted on the next turn
    } else if (c == '/' && i + 1 < text.size() && text[i + 1] == '*') {
      for (i += 2; i < text.size() && !(text[i] == '*' && i + 1 < text.size() && text[i + 1] == '/');
           ++i) {
        if (text[i] == '\n') ++at;
      }
      ++i;
    } else if (c == '"' || c == '\'') {
      for (++i; i < text.size() && text[i] != c && text[i] != '\n'; ++i) {
        if (text[i] == '\\') ++i;
      }
      if (i < text.size() && text[i] == '\n') ++at;
    } else if (c == '{' || c == '(' || c == '[' || c == '<') {
      if (++depth > deepest) deepest = depth;
      if (deepest > limit) {
        if (line != nullptr) *line = at;
        return limit + 1;
      }
    } else if ((c == '}' || c == ')' || c == ']' || c == '>') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

absl::StatusOr<std::unique_ptr<ProtoSource>> ProtoSource::Create(
    const std::vector<std::string>& files, const std::vector<std::string>& proto_paths,
    const ProtoBounds& bounds) {
  std::unique_ptr<ProtoSource> s(new ProtoSource(bounds));
  for (const std::string& p : proto_paths) {
    if (!IsDir(p)) {
      return absl::InvalidArgumentError(absl::StrCat("--proto_path=", Echo(p), ": not a directory"));
    }
    s->roots_.push_back(AbsolutePath(p));
  }
  if (proto_paths.empty()) {  // each file's own folder, once
    for (const std::string& f : files) {
      const std::string dir = AbsolutePath(f + "/..");
      if (std::find(s->roots_.begin(), s->roots_.end(), dir) == s->roots_.end()) {
        s->roots_.push_back(dir);
      }
    }
  }
  if (IsDir("/usr/include/google/protobuf")) s->roots_.push_back("/usr/include");
  for (const std::string& f : files) {
    absl::StatusOr<std::string> v = s->Resolve(f);
    if (!v.ok()) return v.status();
    s->virtual_files_.push_back(*std::move(v));
  }
  return s;
}

std::string ProtoSource::FindVirtual(const std::string& name) const {
  if (!IsCleanVirtual(name)) return "";
  for (const std::string& r : roots_) {
    if (Exists(Join(r, name))) return Join(r, name);
  }
  return "";
}

// protoc's MakeProtoProtoPathRelative: a file on disk maps to its name under
// the first root holding it (refused when an earlier root holds that name
// too), else the argument is a virtual name.
absl::StatusOr<std::string> ProtoSource::Resolve(const std::string& file) const {
  const std::string shown = absl::StrCat("--proto=", Echo(file));
  const size_t user_roots =
      roots_.size() - (!roots_.empty() && roots_.back() == "/usr/include" ? 1 : 0);
  if (Exists(file)) {
    const std::string abs = AbsolutePath(file);
    for (size_t i = 0; i < user_roots; ++i) {
      const std::string prefix = roots_[i] == "/" ? "/" : roots_[i] + "/";
      if (!absl::StartsWith(abs, prefix)) continue;
      const std::string name = abs.substr(prefix.size());
      for (size_t j = 0; j < i; ++j) {
        if (Exists(Join(roots_[j], name))) {
          return absl::InvalidArgumentError(absl::StrCat(
              shown, ": shadowed by ", Join(roots_[j], name),
              " (an earlier --proto_path holds the same name; reorder --proto_path or give that file)"));
        }
      }
      return name;
    }
  }
  if (!FindVirtual(file).empty()) return file;
  std::vector<std::string> mine(roots_.begin(), roots_.begin() + user_roots);
  if (Exists(file)) {
    return absl::InvalidArgumentError(absl::StrCat(
        shown, ": not under any --proto_path (", absl::StrJoin(mine, ","),
        "), nor a name inside one"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      shown, ": no such file in the working directory or under --proto_path ",
      absl::StrJoin(mine, ",")));
}

void ProtoSource::Refuse(const std::string& line) {
  last_error_ = line;
  if (bound_error_.empty()) bound_error_ = absl::StrCat("--proto: ", line);
}

google::protobuf::io::ZeroCopyInputStream* ProtoSource::Open(const std::string& filename) {
  auto it = texts_.find(filename);
  if (it == texts_.end()) {
    const std::string disk = FindVirtual(filename);
    if (disk.empty()) {
      last_error_ = "File not found.";
      return nullptr;
    }
    const std::string shown = Echo(disk);
    if (!bound_error_.empty()) return nullptr;  // one refusal is enough
    if (static_cast<int>(texts_.size()) >= bounds_.max_files) {
      Refuse(absl::StrFormat("%s: one file more than the %d a load may open (--proto files and "
                             "their imports together)",
                             shown, bounds_.max_files));
      return nullptr;
    }
    absl::StatusOr<std::string> text = ReadFileBounded(disk, bounds_.max_file_bytes, "--proto");
    if (!text.ok()) {  // its message already starts with --proto
      last_error_ = std::string(text.status().message());
      bound_error_ = last_error_;
      return nullptr;
    }
    if (total_bytes_ + static_cast<int64_t>(text->size()) > bounds_.max_total_bytes) {
      Refuse(absl::StrFormat("%s: the files opened so far would exceed %d bytes (--proto files "
                             "and their imports together)",
                             shown, bounds_.max_total_bytes));
      return nullptr;
    }
    int line = 0;
    if (ProtoNestingDepth(*text, bounds_.max_depth, &line) > bounds_.max_depth) {
      Refuse(absl::StrFormat("%s:%d: nested deeper than %d levels of { ( [ <", shown, line,
                             bounds_.max_depth));
      return nullptr;
    }
    total_bytes_ += static_cast<int64_t>(text->size());
    it = texts_.emplace(filename, *std::move(text)).first;
  }
  return new google::protobuf::io::ArrayInputStream(it->second.data(),
                                                     static_cast<int>(it->second.size()));
}

}  // namespace rsslab
