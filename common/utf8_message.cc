#include "common/utf8_message.h"

#include <string>
#include <vector>

#include "common/untrusted_text.h"
#include "google/protobuf/descriptor.h"

namespace rsslab {

int ReplaceInvalidUtf8(google::protobuf::Message* m, Utf8Fix fix) {
  using google::protobuf::FieldDescriptor;
  const google::protobuf::Reflection* r = m->GetReflection();
  std::vector<const FieldDescriptor*> fields;
  r->ListFields(*m, &fields);
  int changed = 0;
  for (const FieldDescriptor* f : fields) {
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (!f->is_repeated()) {
        changed += ReplaceInvalidUtf8(r->MutableMessage(m, f), fix);
        continue;
      }
      for (int i = 0; i < r->FieldSize(*m, f); ++i) {
        changed += ReplaceInvalidUtf8(r->MutableRepeatedMessage(m, f, i), fix);
      }
      continue;
    }
    if (f->type() != FieldDescriptor::TYPE_STRING) continue;  // bytes stay bytes
    const int n = f->is_repeated() ? r->FieldSize(*m, f) : 1;
    for (int i = 0; i < n; ++i) {
      std::string scratch;
      const std::string& v = f->is_repeated() ? r->GetRepeatedStringReference(*m, f, i, &scratch)
                                              : r->GetStringReference(*m, f, &scratch);
      if (IsValidUtf8(v)) continue;
      std::string fixed = fix == Utf8Fix::kEscape ? Echo(v, v.size()) : ValidUtf8(v);
      if (f->is_repeated()) {
        r->SetRepeatedString(m, f, i, std::move(fixed));
      } else {
        r->SetString(m, f, std::move(fixed));
      }
      ++changed;
    }
  }
  return changed;
}

}  // namespace rsslab
