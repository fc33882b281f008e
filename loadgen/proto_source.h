// Where the loadgen finds the user's .proto files, and the bounds a tree of
// them must keep before protobuf parses it.
//
// Paths follow protoc's rules: a --proto that exists on disk (absolute, or
// relative to the working directory) is mapped to its virtual name under the
// first --proto_path that contains it; one that does not exist, or lies
// under none, is looked up as a virtual name in each --proto_path in order.
// Without --proto_path each file's own folder is a root. Imports are
// searched in the roots in order, then /usr/include (Debian's well-known
// types). Unlike protoc, a relative and an absolute spelling of one folder
// are the same root (both are made absolute first).
//
// Why bounds on the raw text: protobuf's parser and descriptor builder
// recurse per nesting level and keep every file in memory; a 5,000-deep
// .proto once took the loadgen to 461 MB before it was refused. Every file
// opened (imports included) is counted, sized and scanned for its bracket
// depth here, and the tree is refused with one line naming the file and the
// bound before the parser sees it.
//
//   auto src = rsslab::ProtoSource::Create({"shop.proto"}, {"protos"});
//   google::protobuf::compiler::Importer importer(src->get(), &errors);
//   for (const std::string& v : (*src)->virtual_files()) importer.Import(v);
//   if (!(*src)->bound_error().empty()) { /* the one line to print */ }
#ifndef RSSLAB_LOADGEN_PROTO_SOURCE_H_
#define RSSLAB_LOADGEN_PROTO_SOURCE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/compiler/importer.h"
#include "google/protobuf/io/zero_copy_stream.h"

namespace rsslab {

// What one load of .proto files may take (docs/LOADGEN.md).
struct ProtoBounds {
  int max_files = 256;                      // every file opened, imports included
  int64_t max_file_bytes = int64_t{4} << 20;
  int64_t max_total_bytes = int64_t{16} << 20;
  int max_depth = 64;                       // nested { ( [ < outside comments and strings
};

class ProtoSource : public google::protobuf::compiler::SourceTree {
 public:
  // INVALID_ARGUMENT naming the flag and the file when a --proto cannot be
  // found, is shadowed by an earlier root, or a --proto_path is no folder.
  static absl::StatusOr<std::unique_ptr<ProtoSource>> Create(
      const std::vector<std::string>& files, const std::vector<std::string>& proto_paths,
      const ProtoBounds& bounds = ProtoBounds());

  // The --proto files' virtual names, in the order given.
  const std::vector<std::string>& virtual_files() const { return virtual_files_; }
  // The roots searched, absolute, in order (/usr/include last when present).
  const std::vector<std::string>& roots() const { return roots_; }
  // The first bound a file opened so far broke, as one line; empty if none.
  const std::string& bound_error() const { return bound_error_; }

  // SourceTree: the file read once, checked against the bounds, served from
  // memory. Null (GetLastErrorMessage says why) when absent or out of bounds.
  google::protobuf::io::ZeroCopyInputStream* Open(const std::string& filename) override;
  std::string GetLastErrorMessage() override { return last_error_; }

 private:
  explicit ProtoSource(const ProtoBounds& b) : bounds_(b) {}
  absl::StatusOr<std::string> Resolve(const std::string& file) const;
  std::string FindVirtual(const std::string& name) const;  // disk path or ""
  void Refuse(const std::string& line);

  ProtoBounds bounds_;
  std::vector<std::string> roots_;
  std::vector<std::string> virtual_files_;
  std::map<std::string, std::string> texts_;  // by virtual name; streams point into them
  int64_t total_bytes_ = 0;
  std::string last_error_;
  std::string bound_error_;
};

// The deepest nesting of { ( [ < in .proto text, comments and string
// literals skipped; stops counting once past `limit` (returns limit + 1) and
// sets *line to the line (1-based) where the depth first exceeded it.
int ProtoNestingDepth(absl::string_view text, int limit, int* line);

// `path` made absolute against the working directory, "." and ".." removed
// lexically (symlinks are not followed, as protoc does not).
std::string AbsolutePath(const std::string& path);

}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_PROTO_SOURCE_H_
