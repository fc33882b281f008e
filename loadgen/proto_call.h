// Calls to any method (unary or streaming) of the user's own gRPC service: its .proto files
// parsed at run time (protobuf's compiler::Importer, no code generation),
// requests built from a JSON template into dynamic messages.
//
//   auto catalog = rsslab::ProtoCatalog::Load({"shop.proto"}, {"protos"});
//   rsslab::CallSet calls(catalog->get());
//   absl::Status s = calls.Add(spec);   // spec.call() = "shop.v1.Cart/Add",
//                                       // spec.data() = R"({"id": {{seq}}})"
//   if (!s.ok()) { /* usage error naming the field: nothing was sent */ }
//   std::shared_ptr<const rsslab::RequestSource> src = calls.Find(spec);
//   std::unique_ptr<google::protobuf::Message> m = src->NewMessage();
//   src->Build(/*seq=*/7, /*seed=*/1, m.get());   // then serialize and send
//
// Template syntax (docs/LOADGEN.md, "Calls from a .proto"): protobuf's JSON
// mapping of the request, where a value may hold placeholders:
//   {{seq}}             the request's sequence number (0, 1, 2, ...); for a
//                       streaming call, the stream's
//   {{msg}}             the message's index within its stream (0 for unary)
//   {{rand_int A B}}    an integer drawn uniformly from [A, B]
//   {{rand_str N}}      N characters from [A-Za-z0-9_-]
// A placeholder stands alone as a number ("qty": {{rand_int 1 9}}) or sits
// inside a JSON string ("name": "user-{{seq}}"). Random values are a fixed
// function of (seed, seq): the same run sends the same requests.
//
// Why a prototype and not JSON per request: the template is parsed once into
// a message (every literal field set once) plus a list of the templated
// fields with their reflection paths; building a request sets only those
// (0.22 us for a 10-field message, bench/template_build).
#ifndef RSSLAB_LOADGEN_PROTO_CALL_H_
#define RSSLAB_LOADGEN_PROTO_CALL_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "google/protobuf/compiler/importer.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/dynamic_message.h"
#include "google/protobuf/message.h"
#include "loadgen/proto_source.h"
#include "proto/scenario.pb.h"

namespace rsslab {

// Bounds on what a user may hand the loadgen.
inline constexpr int kMaxProtoFiles = 64;
inline constexpr int kMaxPlaceholders = 256;
inline constexpr int kMaxRandStr = 1 << 16;
inline constexpr int64_t kDataFileMaxBytes = 64 << 20;
inline constexpr int kDataFileMaxLines = 100000;
// A client- or bidi-streaming call's messages per stream when
// --stream_messages is unset (flags_check.h bounds it).
inline constexpr uint32_t kDefaultStreamMessages = 10;

// The descriptors of the user's .proto files.
class ProtoCatalog {
 public:
  // `files`: .proto paths; `import_paths`: directories imports resolve in
  // (default: each file's own directory), found and bounded as
  // loadgen/proto_source.h says. /usr/include is searched last, so
  // google/protobuf/*.proto imports work. INVALID_ARGUMENT with the parser's
  // own message (file:line:column) when a file does not parse, or one line
  // naming the file and the bound a file broke.
  static absl::StatusOr<std::unique_ptr<ProtoCatalog>> Load(
      const std::vector<std::string>& files, const std::vector<std::string>& import_paths);
  ~ProtoCatalog();

  // "package.Service/Method" (or "/package.Service/Method"): a method of any
  // kind (unary or streaming), else INVALID_ARGUMENT saying what is there
  // instead.
  absl::StatusOr<const google::protobuf::MethodDescriptor*> FindMethod(
      absl::string_view call) const;
  // A new, empty message of `type` (thread-safe).
  std::unique_ptr<google::protobuf::Message> New(const google::protobuf::Descriptor* type);

 private:
  ProtoCatalog();
  class Errors;
  std::unique_ptr<Errors> errors_;
  std::unique_ptr<ProtoSource> tree_;
  std::unique_ptr<google::protobuf::compiler::Importer> importer_;
  absl::Mutex mu_;
  google::protobuf::DynamicMessageFactory factory_ ABSL_GUARDED_BY(mu_);
  std::vector<const google::protobuf::FileDescriptor*> files_;
};

// One JSON template compiled against a message type.
class RequestTemplate {
 public:
  enum class Gen { kSeq, kRandInt, kRandStr, kMsg };
  struct Placeholder {
    Gen gen = Gen::kSeq;
    int64_t lo = 0, hi = 0;  // kRandInt: [lo, hi]; kRandStr: length in lo
  };
  // A templated field: where it is and what goes in it.
  struct Slot {
    // From the top message down; index -1 for a singular field.
    std::vector<std::pair<const google::protobuf::FieldDescriptor*, int>> path;
    // Literal text and placeholders, in order (placeholder = index >= 0).
    std::vector<std::pair<std::string, int>> parts;
    bool numeric = false;  // a number field: exactly one numeric placeholder
  };

  // `origin` ("--data", "FILE:LINE") starts every error. INVALID_ARGUMENT
  // naming the field when the template does not fit `type`.
  static absl::StatusOr<std::unique_ptr<RequestTemplate>> Compile(
      ProtoCatalog* catalog, const google::protobuf::Descriptor* type, absl::string_view json,
      absl::string_view origin);

  const google::protobuf::Message& prototype() const { return *prototype_; }
  // Sets every templated field of `msg` (a copy of prototype()) for message
  // `index` of request (stream) `seq`. Thread-safe (const); cheap: no JSON,
  // no allocation for numbers.
  void Fill(uint64_t seq, uint64_t index, uint64_t seed, google::protobuf::Message* msg) const;
  size_t slots() const { return slots_.size(); }

 private:
  std::unique_ptr<google::protobuf::Message> prototype_;
  std::vector<Placeholder> placeholders_;
  std::vector<Slot> slots_;
};

// What a load step sends: the method and its request template(s).
class RequestSource {
 public:
  // The method's kind: a streaming call sends messages() request messages
  // per stream (one for server streaming).
  enum class Kind { kUnary, kServerStreaming, kClientStreaming, kBidi };
  Kind kind() const { return kind_; }
  bool streaming() const { return kind_ != Kind::kUnary; }
  uint32_t messages() const { return messages_; }
  // "/package.Service/Method", as gRPC's generic stub wants it.
  const std::string& method_path() const { return method_path_; }
  const std::string& call() const { return call_; }
  // A message to build requests into (one per in-flight slot).
  std::unique_ptr<google::protobuf::Message> NewMessage() const;
  // Request `seq` into `msg` (from NewMessage): --data_file lines in turn.
  void Build(uint64_t seq, uint64_t seed, google::protobuf::Message* msg) const;
  // Message `index` of stream `seq`: --data_file lines in turn by message,
  // {{msg}} = index.
  void BuildMessage(uint64_t seq, uint64_t index, uint64_t seed,
                    google::protobuf::Message* msg) const;

 private:
  friend class CallSet;
  Kind kind_ = Kind::kUnary;
  uint32_t messages_ = 1;
  std::string call_;
  std::string method_path_;
  std::vector<std::unique_ptr<RequestTemplate>> templates_;
};

// Plain text with the same placeholders (an HTTP request's path, header
// values and body): {{seq}}, {{msg}} (always 0), {{rand_int A B}},
// {{rand_str N}}, drawn as RequestTemplate draws them.
//
//   absl::StatusOr<TextTemplate> t = TextTemplate::Compile("/items/{{seq}}", "--target");
//   std::string s;
//   t->Expand(/*seq=*/7, /*seed=*/1, &s);   // appends "/items/7"
class TextTemplate {
 public:
  // INVALID_ARGUMENT naming `origin` and the placeholder when one is bad.
  static absl::StatusOr<TextTemplate> Compile(absl::string_view text, absl::string_view origin);
  // Appends request `seq`'s text to *out. Thread-safe (const).
  void Expand(uint64_t seq, uint64_t seed, std::string* out) const;
  // No placeholder: the text is the same for every request.
  bool literal() const { return placeholders_.empty(); }
  const std::string& text() const { return text_; }

 private:
  std::string text_;
  std::vector<RequestTemplate::Placeholder> placeholders_;
  std::vector<std::pair<std::string, int>> parts_;  // literal, or placeholder index >= 0
};

// Every call a plan's load steps make, compiled before anything is sent.
class CallSet {
 public:
  explicit CallSet(ProtoCatalog* catalog) : catalog_(catalog) {}
  // Compiles spec's call (a no-op for the built-in call or one already
  // added). INVALID_ARGUMENT naming the method or the field otherwise.
  absl::Status Add(const rsslab::v1::LoadSpec& spec);
  // Null when spec names no call or it was not added.
  std::shared_ptr<const RequestSource> Find(const rsslab::v1::LoadSpec& spec) const;

 private:
  static std::string Key(const rsslab::v1::LoadSpec& spec);
  ProtoCatalog* catalog_;  // not owned; may be null (no --proto)
  std::map<std::string, std::shared_ptr<const RequestSource>> sources_;
};

}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_PROTO_CALL_H_
