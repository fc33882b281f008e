#include "python/native/to_python.h"

#include <string>

#include "google/protobuf/descriptor.h"

namespace rsslab {
namespace py {
namespace {

namespace pb = google::protobuf;
namespace py11 = pybind11;

py11::object Scalar(const pb::Message& m, const pb::FieldDescriptor* f, int index) {
  const pb::Reflection* r = m.GetReflection();
  const bool rep = index >= 0;
  switch (f->cpp_type()) {
    case pb::FieldDescriptor::CPPTYPE_INT32:
      return py11::int_(rep ? r->GetRepeatedInt32(m, f, index) : r->GetInt32(m, f));
    case pb::FieldDescriptor::CPPTYPE_INT64:
      return py11::int_(rep ? r->GetRepeatedInt64(m, f, index) : r->GetInt64(m, f));
    case pb::FieldDescriptor::CPPTYPE_UINT32:
      return py11::int_(rep ? r->GetRepeatedUInt32(m, f, index) : r->GetUInt32(m, f));
    case pb::FieldDescriptor::CPPTYPE_UINT64:
      return py11::int_(rep ? r->GetRepeatedUInt64(m, f, index) : r->GetUInt64(m, f));
    case pb::FieldDescriptor::CPPTYPE_DOUBLE:
      return py11::float_(rep ? r->GetRepeatedDouble(m, f, index) : r->GetDouble(m, f));
    case pb::FieldDescriptor::CPPTYPE_FLOAT:
      return py11::float_(rep ? r->GetRepeatedFloat(m, f, index) : r->GetFloat(m, f));
    case pb::FieldDescriptor::CPPTYPE_BOOL:
      return py11::bool_(rep ? r->GetRepeatedBool(m, f, index) : r->GetBool(m, f));
    case pb::FieldDescriptor::CPPTYPE_ENUM:
      return py11::str((rep ? r->GetRepeatedEnum(m, f, index) : r->GetEnum(m, f))->name());
    case pb::FieldDescriptor::CPPTYPE_STRING: {
      std::string s = rep ? r->GetRepeatedString(m, f, index) : r->GetString(m, f);
      if (f->type() == pb::FieldDescriptor::TYPE_BYTES) return py11::bytes(s);
      // Strings from /proc (thread names, paths) need not be UTF-8.
      PyObject* o = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace");
      if (o == nullptr) throw py11::error_already_set();
      return py11::reinterpret_steal<py11::object>(o);
    }
    case pb::FieldDescriptor::CPPTYPE_MESSAGE:
      return MessageToDict(rep ? r->GetRepeatedMessage(m, f, index) : r->GetMessage(m, f));
  }
  return py11::none();
}

}  // namespace

py11::dict MessageToDict(const pb::Message& m) {
  py11::dict out;
  const pb::Descriptor* d = m.GetDescriptor();
  const pb::Reflection* r = m.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const pb::FieldDescriptor* f = d->field(i);
    py11::str key(f->json_name());
    if (f->is_map()) {
      py11::dict map;
      const pb::FieldDescriptor* k = f->message_type()->map_key();
      const pb::FieldDescriptor* v = f->message_type()->map_value();
      for (int j = 0; j < r->FieldSize(m, f); ++j) {
        const pb::Message& entry = r->GetRepeatedMessage(m, f, j);
        map[Scalar(entry, k, -1)] = Scalar(entry, v, -1);
      }
      out[key] = map;
    } else if (f->is_repeated()) {
      py11::list list;
      for (int j = 0; j < r->FieldSize(m, f); ++j) list.append(Scalar(m, f, j));
      out[key] = list;
    } else {
      out[key] = Scalar(m, f, -1);
    }
  }
  return out;
}

}  // namespace py
}  // namespace rsslab
