#include "loadgen/proto_call.h"

#include <sys/stat.h>

#include <limits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/echo.h"
#include "common/files.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace rsslab {

using ::google::protobuf::Descriptor;
using ::google::protobuf::FieldDescriptor;
using ::google::protobuf::Message;
using ::google::protobuf::MethodDescriptor;
using ::google::protobuf::Reflection;
using ::google::protobuf::Value;

class ProtoCatalog::Errors : public google::protobuf::compiler::MultiFileErrorCollector {
 public:
  void AddError(const std::string& file, int line, int column, const std::string& msg) override {
    if (lines_.size() >= 20) return;  // the first ones say what is wrong
    lines_.push_back(line < 0 ? absl::StrCat(file, ": ", msg)
                              : absl::StrFormat("%s:%d:%d: %s", file, line + 1, column + 1, msg));
  }
  std::string Take() {
    std::string s = absl::StrJoin(lines_, "\n");
    lines_.clear();
    return s;
  }

 private:
  std::vector<std::string> lines_;
};

ProtoCatalog::ProtoCatalog() = default;
ProtoCatalog::~ProtoCatalog() = default;

absl::StatusOr<std::unique_ptr<ProtoCatalog>> ProtoCatalog::Load(
    const std::vector<std::string>& files, const std::vector<std::string>& import_paths) {
  if (files.empty()) return absl::InvalidArgumentError("--proto: no file given");
  if (files.size() > kMaxProtoFiles) {
    return absl::InvalidArgumentError(absl::StrFormat("--proto: more than %d files", kMaxProtoFiles));
  }
  std::unique_ptr<ProtoCatalog> c(new ProtoCatalog);
  c->errors_ = std::make_unique<Errors>();
  // Found as protoc finds them, and bounded before the parser reads a byte
  // (loadgen/proto_source.h).
  absl::StatusOr<std::unique_ptr<ProtoSource>> tree = ProtoSource::Create(files, import_paths);
  if (!tree.ok()) return tree.status();
  c->tree_ = *std::move(tree);
  c->importer_ =
      std::make_unique<google::protobuf::compiler::Importer>(c->tree_.get(), c->errors_.get());
  for (size_t i = 0; i < files.size(); ++i) {
    const google::protobuf::FileDescriptor* fd = c->importer_->Import(c->tree_->virtual_files()[i]);
    if (!c->tree_->bound_error().empty()) return absl::InvalidArgumentError(c->tree_->bound_error());
    if (fd == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("--proto=", Echo(files[i]), ": ", c->errors_->Take()));
    }
    c->files_.push_back(fd);
  }
  return c;
}

absl::StatusOr<const MethodDescriptor*> ProtoCatalog::FindMethod(absl::string_view call) const {
  absl::string_view c = call;
  absl::ConsumePrefix(&c, "/");
  const size_t slash = c.rfind('/');
  if (slash == absl::string_view::npos || slash == 0 || slash + 1 == c.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--call=", Echo(call), ": want package.Service/Method"));
  }
  const std::string service(c.substr(0, slash));
  const std::string method(c.substr(slash + 1));
  const auto* sd = importer_->pool()->FindServiceByName(service);
  if (sd == nullptr) {
    std::vector<std::string> known;
    for (const auto* f : files_) {
      for (int i = 0; i < f->service_count(); ++i) {
        const auto* svc = f->service(i);
        std::vector<std::string> methods;
        for (int j = 0; j < svc->method_count(); ++j) methods.push_back(svc->method(j)->name());
        known.push_back(absl::StrCat(svc->full_name(), " (", absl::StrJoin(methods, ", "), ")"));
      }
    }
    return absl::InvalidArgumentError(
        absl::StrCat("--call=", Echo(call), ": no service ", Echo(service), " in the --proto files (services: ",
                     known.empty() ? "none" : absl::StrJoin(known, ", "), ")"));
  }
  const MethodDescriptor* md = sd->FindMethodByName(method);
  if (md == nullptr) {
    std::vector<std::string> known;
    for (int i = 0; i < sd->method_count(); ++i) known.push_back(sd->method(i)->name());
    return absl::InvalidArgumentError(absl::StrCat("--call=", Echo(call), ": ", Echo(service), " has no method ",
                                                   Echo(method), " (methods: ", absl::StrJoin(known, ", "),
                                                   ")"));
  }
  return md;
}

std::unique_ptr<Message> ProtoCatalog::New(const Descriptor* type) {
  absl::MutexLock l(&mu_);
  return std::unique_ptr<Message>(factory_.GetPrototype(type)->New());
}

namespace {

// Markers the scanner puts where placeholders were, so protobuf's own JSON
// parser reads the template once as a generic JSON tree: "\x01K\x02" inside
// a string, the string "\x03K\x02" for a bare placeholder.
constexpr char kInString = '\x01';
constexpr char kBare = '\x03';
constexpr char kEnd = '\x02';

uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

absl::StatusOr<RequestTemplate::Placeholder> ParsePlaceholder(absl::string_view body,
                                                              absl::string_view origin) {
  std::vector<absl::string_view> w = absl::StrSplit(body, ' ', absl::SkipWhitespace());
  RequestTemplate::Placeholder p;
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": {{", body, "}}: ", why));
  };
  if (w.size() == 1 && w[0] == "seq") return p;
  if (w.size() == 1 && w[0] == "msg") {
    p.gen = RequestTemplate::Gen::kMsg;
    return p;
  }
  if (!w.empty() && w[0] == "rand_int") {
    p.gen = RequestTemplate::Gen::kRandInt;
    if (w.size() != 3 || !absl::SimpleAtoi(w[1], &p.lo) || !absl::SimpleAtoi(w[2], &p.hi) ||
        p.lo > p.hi) {
      return bad("want {{rand_int MIN MAX}} with integers MIN <= MAX");
    }
    return p;
  }
  if (!w.empty() && w[0] == "rand_str") {
    p.gen = RequestTemplate::Gen::kRandStr;
    if (w.size() != 2 || !absl::SimpleAtoi(w[1], &p.lo) || p.lo < 1 || p.lo > kMaxRandStr) {
      return bad(absl::StrFormat("want {{rand_str N}} with 1 <= N <= %d", kMaxRandStr));
    }
    return p;
  }
  return bad(
      "unknown placeholder (use {{seq}}, {{msg}}, {{rand_int MIN MAX}} or {{rand_str N}})");
}

// The value placeholder `k` takes for message `msg` of request (seq, seed):
// numbers.
int64_t IntValue(const RequestTemplate::Placeholder& p, uint64_t seq, uint64_t msg,
                 uint64_t rnd) {
  if (p.gen == RequestTemplate::Gen::kSeq) return static_cast<int64_t>(seq);
  if (p.gen == RequestTemplate::Gen::kMsg) return static_cast<int64_t>(msg);
  const uint64_t span = static_cast<uint64_t>(p.hi) - static_cast<uint64_t>(p.lo) + 1;
  const uint64_t off = span == 0 ? rnd : rnd % span;  // span 0: the full 64-bit range
  return static_cast<int64_t>(static_cast<uint64_t>(p.lo) + off);
}

void AppendValue(const RequestTemplate::Placeholder& p, uint64_t seq, uint64_t msg, uint64_t rnd,
                 std::string* out) {
  if (p.gen != RequestTemplate::Gen::kRandStr) {
    absl::StrAppend(out, IntValue(p, seq, msg, rnd));
    return;
  }
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-";
  const size_t at = out->size();
  out->resize(at + static_cast<size_t>(p.lo));
  char* d = out->data() + at;
  uint64_t bits = rnd;
  for (int64_t i = 0; i < p.lo; ++i) {
    if (i % 10 == 0 && i > 0) bits = Mix(bits);  // 6 bits a character, 10 a word
    d[i] = kAlphabet[bits & 63];
    bits >>= 6;
  }
}

// A sample value (for the prototype): what the parser must accept.
void AppendSample(const RequestTemplate::Placeholder& p, std::string* out) {
  if (p.gen == RequestTemplate::Gen::kRandStr) {
    out->append(static_cast<size_t>(p.lo), 'a');
  } else {
    absl::StrAppend(out, p.gen == RequestTemplate::Gen::kRandInt ? p.lo : 0);
  }
}

bool HasMarker(const Value& v) {
  switch (v.kind_case()) {
    case Value::kStringValue:
      return v.string_value().find(kEnd) != std::string::npos;
    case Value::kListValue:
      for (const Value& e : v.list_value().values()) {
        if (HasMarker(e)) return true;
      }
      return false;
    case Value::kStructValue:
      for (const auto& [k, e] : v.struct_value().fields()) {
        if (k.find(kEnd) != std::string::npos || HasMarker(e)) return true;
      }
      return false;
    default:
      return false;
  }
}

bool IsNumber(FieldDescriptor::CppType t) {
  switch (t) {
    case FieldDescriptor::CPPTYPE_INT32:
    case FieldDescriptor::CPPTYPE_INT64:
    case FieldDescriptor::CPPTYPE_UINT32:
    case FieldDescriptor::CPPTYPE_UINT64:
    case FieldDescriptor::CPPTYPE_DOUBLE:
    case FieldDescriptor::CPPTYPE_FLOAT:
      return true;
    default:
      return false;
  }
}

// Walks the template's JSON tree beside the message type, finding each
// placeholder's field. Fields the type lacks are left to the JSON parser,
// whose message names them.
class Locator {
 public:
  Locator(absl::string_view origin, const std::vector<RequestTemplate::Placeholder>& ph)
      : origin_(origin), ph_(ph), bare_field_(ph.size(), nullptr), located_(ph.size(), false) {}

  absl::Status Message(const Value& v, const Descriptor* d, const std::string& name,
                       std::vector<std::pair<const FieldDescriptor*, int>> path) {
    if (v.kind_case() != Value::kStructValue) return absl::OkStatus();
    for (const auto& [key, val] : v.struct_value().fields()) {
      if (key.find(kEnd) != std::string::npos) {
        return Bad(name.empty() ? "(top)" : name, "a placeholder in a key; they go in values");
      }
      const FieldDescriptor* f = d->FindFieldByName(key);
      for (int i = 0; f == nullptr && i < d->field_count(); ++i) {
        if (d->field(i)->json_name() == key) f = d->field(i);  // "lowerCamel" spelling
      }
      if (f == nullptr) continue;
      const std::string fname = name.empty() ? key : absl::StrCat(name, ".", key);
      if (f->is_map()) {
        if (HasMarker(val)) return Bad(fname, "placeholders in map fields are not supported");
        continue;
      }
      auto p = path;
      if (f->is_repeated()) {
        if (val.kind_case() != Value::kListValue) continue;
        for (int i = 0; i < val.list_value().values_size(); ++i) {
          p = path;
          p.emplace_back(f, i);
          if (absl::Status s = Field(val.list_value().values(i), f, absl::StrCat(fname, "[", i, "]"), p);
              !s.ok()) {
            return s;
          }
        }
        continue;
      }
      p.emplace_back(f, -1);
      if (absl::Status s = Field(val, f, fname, p); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  const FieldDescriptor* bare_field(int k) const { return bare_field_[k]; }
  bool located(int k) const { return located_[k]; }
  std::vector<RequestTemplate::Slot> TakeSlots() { return std::move(slots_); }

 private:
  absl::Status Bad(const std::string& field, absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(origin_, ": field ", field, ": ", why));
  }

  absl::Status Field(const Value& v, const FieldDescriptor* f, const std::string& name,
                     const std::vector<std::pair<const FieldDescriptor*, int>>& path) {
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (absl::StartsWith(f->message_type()->file()->name(), "google/protobuf/")) {
        if (HasMarker(v)) {
          return Bad(name, absl::StrCat("placeholders inside ", f->message_type()->full_name(),
                                        " are not supported"));
        }
        return absl::OkStatus();
      }
      return Message(v, f->message_type(), name, path);
    }
    if (v.kind_case() != Value::kStringValue) return absl::OkStatus();
    const std::string& s = v.string_value();
    if (s.find(kEnd) == std::string::npos) return absl::OkStatus();
    RequestTemplate::Slot slot;
    slot.path = path;
    bool bare = false;
    size_t i = 0;
    std::string lit;
    while (i < s.size()) {
      if ((s[i] == kInString || s[i] == kBare) && s.find(kEnd, i) != std::string::npos) {
        const size_t e = s.find(kEnd, i);
        int k = -1;
        if (absl::SimpleAtoi(absl::string_view(s).substr(i + 1, e - i - 1), &k) && k >= 0 &&
            k < static_cast<int>(ph_.size())) {
          if (!lit.empty()) slot.parts.emplace_back(std::move(lit), -1);
          lit.clear();
          slot.parts.emplace_back("", k);
          located_[k] = true;
          if (s[i] == kBare) {
            bare = true;
            bare_field_[k] = f;
          }
          i = e + 1;
          continue;
        }
      }
      lit.push_back(s[i++]);
    }
    if (!lit.empty()) slot.parts.emplace_back(std::move(lit), -1);
    const auto t = f->cpp_type();
    const bool single = slot.parts.size() == 1 && slot.parts[0].second >= 0;
    if (t == FieldDescriptor::CPPTYPE_STRING) {
      if (bare) return Bad(name, "a string field: put its placeholder inside quotes");
    } else if (IsNumber(t) || t == FieldDescriptor::CPPTYPE_ENUM) {
      const auto* what = t == FieldDescriptor::CPPTYPE_ENUM ? "an enum field" : "a number field";
      if (!single) {
        return Bad(name, absl::StrCat(what, ": its value must be one {{seq}} or {{rand_int MIN MAX}}"));
      }
      const RequestTemplate::Placeholder& p = ph_[slot.parts[0].second];
      if (p.gen == RequestTemplate::Gen::kRandStr) {
        return Bad(name, absl::StrCat(what, ": {{rand_str}} makes text; use {{rand_int MIN MAX}}"));
      }
      if (t == FieldDescriptor::CPPTYPE_ENUM && !bare) {
        return Bad(name, "an enum field: a number placeholder goes without quotes (names are literal)");
      }
      if (absl::Status s = CheckRange(p, t, name); !s.ok()) return s;
      slot.numeric = true;
    } else {
      return Bad(name, absl::StrCat("a ", f->cpp_type_name(),
                                    " field: placeholders make numbers and strings"));
    }
    slots_.push_back(std::move(slot));
    return absl::OkStatus();
  }

  absl::Status CheckRange(const RequestTemplate::Placeholder& p, FieldDescriptor::CppType t,
                          const std::string& name) {
    if (p.gen != RequestTemplate::Gen::kRandInt) return absl::OkStatus();  // seq, msg wrap
    int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
    switch (t) {
      case FieldDescriptor::CPPTYPE_INT32:
      case FieldDescriptor::CPPTYPE_ENUM:
        lo = std::numeric_limits<int32_t>::min();
        hi = std::numeric_limits<int32_t>::max();
        break;
      case FieldDescriptor::CPPTYPE_UINT32:
        lo = 0;
        hi = std::numeric_limits<uint32_t>::max();
        break;
      case FieldDescriptor::CPPTYPE_UINT64:
        lo = 0;
        break;
      default:
        break;
    }
    if (p.lo < lo || p.hi > hi) {
      return Bad(name, absl::StrFormat("{{rand_int %d %d}} is outside the field's range [%d, %d]",
                                       p.lo, p.hi, lo, hi));
    }
    return absl::OkStatus();
  }

  const std::string origin_;
  const std::vector<RequestTemplate::Placeholder>& ph_;
  std::vector<const FieldDescriptor*> bare_field_;
  std::vector<bool> located_;
  std::vector<RequestTemplate::Slot> slots_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<RequestTemplate>> RequestTemplate::Compile(
    ProtoCatalog* catalog, const Descriptor* type, absl::string_view json,
    absl::string_view origin) {
  auto t = std::make_unique<RequestTemplate>();
  // 1. Placeholders out, markers in (tracking whether each is in a string).
  struct Piece {
    std::string text;  // literal JSON
    int ph = -1;       // or a placeholder
    bool in_string = false;
  };
  std::vector<Piece> pieces(1);
  bool in_str = false, esc = false;
  for (size_t i = 0; i < json.size();) {
    if (json.compare(i, 2, "{{") == 0) {
      const size_t e = json.find("}}", i + 2);
      if (e == absl::string_view::npos) {
        return absl::InvalidArgumentError(absl::StrCat(origin, ": \"{{\" without \"}}\""));
      }
      absl::StatusOr<Placeholder> p = ParsePlaceholder(json.substr(i + 2, e - i - 2), origin);
      if (!p.ok()) return p.status();
      if (!in_str && p->gen == Gen::kRandStr) {
        return absl::InvalidArgumentError(
            absl::StrCat(origin, ": {{", json.substr(i + 2, e - i - 2),
                         "}} makes text: put it inside a JSON string"));
      }
      if (t->placeholders_.size() >= kMaxPlaceholders) {
        return absl::InvalidArgumentError(
            absl::StrFormat("%s: more than %d placeholders", origin, kMaxPlaceholders));
      }
      pieces.push_back({"", static_cast<int>(t->placeholders_.size()), in_str});
      pieces.emplace_back();
      t->placeholders_.push_back(*p);
      i = e + 2;
      continue;
    }
    const char c = json[i++];
    if (in_str) {
      if (esc) {
        esc = false;
      } else if (c == '\\') {
        esc = true;
      } else if (c == '"') {
        in_str = false;
      }
    } else if (c == '"') {
      in_str = true;
    }
    pieces.back().text.push_back(c);
  }
  std::string marked;
  for (const Piece& p : pieces) {
    if (p.ph < 0) {
      marked += p.text;
    } else if (p.in_string) {
      absl::StrAppend(&marked, "\\u0001", p.ph, "\\u0002");
    } else {
      absl::StrAppend(&marked, "\"\\u0003", p.ph, "\\u0002\"");
    }
  }
  // 2. Where each placeholder is, in the message's terms.
  Value tree;
  Locator loc(origin, t->placeholders_);
  if (!t->placeholders_.empty()) {
    auto parsed = google::protobuf::util::JsonStringToMessage(marked, &tree);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(origin, ": not JSON: ", std::string(parsed.message())));
    }
    if (absl::Status s = loc.Message(tree, type, "", {}); !s.ok()) return s;
  }
  // 3. The prototype: the template with sample values, through protobuf's
  // JSON parser (which names an unknown field or a value of the wrong type).
  std::string sample;
  for (const Piece& p : pieces) {
    if (p.ph < 0) {
      sample += p.text;
    } else {
      AppendSample(t->placeholders_[p.ph], &sample);
    }
  }
  t->prototype_ = catalog->New(type);
  auto parsed = google::protobuf::util::JsonStringToMessage(sample, t->prototype_.get());
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": does not fit ", type->full_name(),
                                                   ": ", std::string(parsed.message())));
  }
  for (size_t k = 0; k < t->placeholders_.size(); ++k) {
    if (!loc.located(static_cast<int>(k))) {
      return absl::InvalidArgumentError(absl::StrCat(
          origin, ": placeholder ", k + 1, " is not in a field value of ", type->full_name()));
    }
  }
  t->slots_ = loc.TakeSlots();
  return t;
}

void RequestTemplate::Fill(uint64_t seq, uint64_t index, uint64_t seed, Message* msg) const {
  uint64_t base = Mix(seed ^ Mix(seq));
  // A stream's later messages draw their own random values (message 0 draws
  // what a unary request `seq` does).
  if (index > 0) base = Mix(base + index);
  std::string text;
  for (const Slot& slot : slots_) {
    Message* m = msg;
    const Reflection* r = m->GetReflection();
    for (size_t j = 0; j + 1 < slot.path.size(); ++j) {
      const auto& [f, i] = slot.path[j];
      m = i < 0 ? r->MutableMessage(m, f) : r->MutableRepeatedMessage(m, f, i);
      r = m->GetReflection();
    }
    const auto& [f, i] = slot.path.back();
    if (slot.numeric) {
      const int k = slot.parts[0].second;
      const int64_t v = IntValue(placeholders_[k], seq, index, Mix(base + k));
      switch (f->cpp_type()) {
        case FieldDescriptor::CPPTYPE_INT32:
          i < 0 ? r->SetInt32(m, f, static_cast<int32_t>(v))
                : r->SetRepeatedInt32(m, f, i, static_cast<int32_t>(v));
          break;
        case FieldDescriptor::CPPTYPE_INT64:
          i < 0 ? r->SetInt64(m, f, v) : r->SetRepeatedInt64(m, f, i, v);
          break;
        case FieldDescriptor::CPPTYPE_UINT32:
          i < 0 ? r->SetUInt32(m, f, static_cast<uint32_t>(v))
                : r->SetRepeatedUInt32(m, f, i, static_cast<uint32_t>(v));
          break;
        case FieldDescriptor::CPPTYPE_UINT64:
          i < 0 ? r->SetUInt64(m, f, static_cast<uint64_t>(v))
                : r->SetRepeatedUInt64(m, f, i, static_cast<uint64_t>(v));
          break;
        case FieldDescriptor::CPPTYPE_DOUBLE:
          i < 0 ? r->SetDouble(m, f, static_cast<double>(v))
                : r->SetRepeatedDouble(m, f, i, static_cast<double>(v));
          break;
        case FieldDescriptor::CPPTYPE_FLOAT:
          i < 0 ? r->SetFloat(m, f, static_cast<float>(v))
                : r->SetRepeatedFloat(m, f, i, static_cast<float>(v));
          break;
        case FieldDescriptor::CPPTYPE_ENUM:
          i < 0 ? r->SetEnumValue(m, f, static_cast<int>(v))
                : r->SetRepeatedEnumValue(m, f, i, static_cast<int>(v));
          break;
        default:
          break;  // refused by Compile
      }
      continue;
    }
    text.clear();
    for (const auto& [lit, k] : slot.parts) {
      if (k < 0) {
        text += lit;
      } else {
        AppendValue(placeholders_[k], seq, index, Mix(base + k), &text);
      }
    }
    i < 0 ? r->SetString(m, f, text) : r->SetRepeatedString(m, f, i, text);
  }
}

std::unique_ptr<Message> RequestSource::NewMessage() const {
  std::unique_ptr<Message> m(templates_[0]->prototype().New());
  m->CopyFrom(templates_[0]->prototype());
  return m;
}

void RequestSource::Build(uint64_t seq, uint64_t seed, Message* msg) const {
  BuildMessage(seq, 0, seed, msg);
}

void RequestSource::BuildMessage(uint64_t seq, uint64_t index, uint64_t seed, Message* msg) const {
  // Unary calls take the templates in turn by request, streams by message.
  const uint64_t turn = kind_ == Kind::kUnary ? seq : index;
  const RequestTemplate& t = *templates_[templates_.size() == 1 ? 0 : turn % templates_.size()];
  // One template: the message already holds its literal fields (and the
  // templated ones are all overwritten), so only those are set.
  if (templates_.size() > 1) msg->CopyFrom(t.prototype());
  t.Fill(seq, index, seed, msg);
}

std::string CallSet::Key(const rsslab::v1::LoadSpec& spec) {
  return absl::StrCat(spec.call(), std::string(1, '\0'), spec.data(), std::string(1, '\0'),
                      spec.data_file(), std::string(1, '\0'), spec.stream_messages());
}

namespace {

RequestSource::Kind KindOf(const MethodDescriptor& md) {
  using Kind = RequestSource::Kind;
  if (md.client_streaming()) return md.server_streaming() ? Kind::kBidi : Kind::kClientStreaming;
  return md.server_streaming() ? Kind::kServerStreaming : Kind::kUnary;
}

// --stream_messages / --stream_interval fit the method's kind.
absl::Status CheckStreamKnobs(const rsslab::v1::LoadSpec& spec, RequestSource::Kind kind) {
  using Kind = RequestSource::Kind;
  const bool knobs = spec.stream_messages() > 0 || spec.stream_interval_ms() > 0;
  if (kind == Kind::kUnary && knobs) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--call=", spec.call(),
        ": a unary method; --stream_messages and --stream_interval apply to streaming methods"));
  }
  if (kind == Kind::kServerStreaming && spec.stream_messages() > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--call=", spec.call(),
        ": a server-streaming method takes one request message (--stream_messages=1 or unset)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CallSet::Add(const rsslab::v1::LoadSpec& spec) {
  if (spec.call().empty()) {
    if (spec.stream_messages() > 0 || spec.stream_interval_ms() > 0) {
      return absl::InvalidArgumentError(
          "--stream_messages / --stream_interval without --call: name a streaming method "
          "(the built-in one: --proto=load.proto --call=rsslab.v1.Load/HandleStream)");
    }
    if (!spec.data().empty() || !spec.data_file().empty()) {
      return absl::InvalidArgumentError(
          "--data / --data_file (or a step's data) without --call: the built-in "
          "rsslab.v1.Load/Handle takes --params and --payload_bytes");
    }
    return absl::OkStatus();
  }
  if (sources_.count(Key(spec)) != 0) return absl::OkStatus();
  if (catalog_ == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--call=", spec.call(),
        " needs --proto=FILE (the service's .proto; rsslab has no reflection client, see "
        "docs/LOADGEN.md)"));
  }
  absl::StatusOr<const MethodDescriptor*> md = catalog_->FindMethod(spec.call());
  if (!md.ok()) return md.status();
  auto src = std::make_shared<RequestSource>();
  src->call_ = spec.call();
  src->method_path_ = absl::StrCat("/", (*md)->service()->full_name(), "/", (*md)->name());
  src->kind_ = KindOf(**md);
  if (absl::Status s = CheckStreamKnobs(spec, src->kind_); !s.ok()) return s;
  src->messages_ = src->kind_ == RequestSource::Kind::kUnary ||
                           src->kind_ == RequestSource::Kind::kServerStreaming
                       ? 1
                       : (spec.stream_messages() > 0 ? spec.stream_messages()
                                                     : kDefaultStreamMessages);
  const Descriptor* type = (*md)->input_type();
  if (!spec.data_file().empty()) {
    absl::StatusOr<std::string> text =
        ReadFileBounded(spec.data_file(), kDataFileMaxBytes, "--data_file");
    if (!text.ok()) return absl::InvalidArgumentError(text.status().message());
    int line_no = 0;
    for (absl::string_view line : absl::StrSplit(*text, '\n')) {
      ++line_no;
      line = absl::StripAsciiWhitespace(line);
      if (line.empty()) continue;
      if (src->templates_.size() >= kDataFileMaxLines) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "--data_file=%s: more than %d lines", spec.data_file(), kDataFileMaxLines));
      }
      auto t = RequestTemplate::Compile(catalog_, type, line,
                                        absl::StrCat(spec.data_file(), ":", line_no));
      if (!t.ok()) return t.status();
      src->templates_.push_back(*std::move(t));
    }
    if (src->templates_.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--data_file=", spec.data_file(), ": no JSON line in it"));
    }
  } else {
    auto t = RequestTemplate::Compile(catalog_, type, spec.data().empty() ? "{}" : spec.data(),
                                      absl::StrCat("--data for ", spec.call()));
    if (!t.ok()) return t.status();
    src->templates_.push_back(*std::move(t));
  }
  sources_[Key(spec)] = std::move(src);
  return absl::OkStatus();
}

std::shared_ptr<const RequestSource> CallSet::Find(const rsslab::v1::LoadSpec& spec) const {
  if (spec.call().empty()) return nullptr;
  auto it = sources_.find(Key(spec));
  return it == sources_.end() ? nullptr : it->second;
}

absl::StatusOr<TextTemplate> TextTemplate::Compile(absl::string_view text,
                                                   absl::string_view origin) {
  TextTemplate t;
  t.text_ = std::string(text);
  std::string lit;
  for (size_t i = 0; i < text.size();) {
    if (text.compare(i, 2, "{{") != 0) {
      lit += text[i++];
      continue;
    }
    const size_t e = text.find("}}", i + 2);
    if (e == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(origin, ": \"{{\" without \"}}\""));
    }
    absl::StatusOr<RequestTemplate::Placeholder> p =
        ParsePlaceholder(text.substr(i + 2, e - i - 2), origin);
    if (!p.ok()) return p.status();
    if (t.placeholders_.size() >= kMaxPlaceholders) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: more than %d placeholders", origin, kMaxPlaceholders));
    }
    if (!lit.empty()) t.parts_.emplace_back(std::move(lit), -1);
    lit.clear();
    t.parts_.emplace_back("", static_cast<int>(t.placeholders_.size()));
    t.placeholders_.push_back(*p);
    i = e + 2;
  }
  if (!lit.empty()) t.parts_.emplace_back(std::move(lit), -1);
  return t;
}

void TextTemplate::Expand(uint64_t seq, uint64_t seed, std::string* out) const {
  if (placeholders_.empty()) {
    out->append(text_);
    return;
  }
  const uint64_t base = Mix(seed ^ Mix(seq));  // as RequestTemplate::Fill draws
  for (const auto& [lit, k] : parts_) {
    if (k < 0) {
      out->append(lit);
    } else {
      AppendValue(placeholders_[k], seq, 0, Mix(base + k), out);
    }
  }
}

}  // namespace rsslab
