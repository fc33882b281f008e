// A protobuf message as plain Python values, keyed by the fields' JSON
// names (what protobuf's JSON mapping prints), but with int64 as int rather
// than JSON's strings and enums as their names: a dict a user can log or
// compare directly.
//
// Example (GIL held):
//   pybind11::dict d = rsslab::py::MessageToDict(snapshot);
//   d["status"]["rssBytes"]  -> 123456789

#ifndef RSSLAB_PYTHON_NATIVE_TO_PYTHON_H_
#define RSSLAB_PYTHON_NATIVE_TO_PYTHON_H_

#include <pybind11/pybind11.h>

#include "google/protobuf/message.h"

namespace rsslab {
namespace py {

// Every field, set or not (a missing sub-message is an empty dict), so the
// keys do not depend on the values.
pybind11::dict MessageToDict(const google::protobuf::Message& m);

}  // namespace py
}  // namespace rsslab

#endif  // RSSLAB_PYTHON_NATIVE_TO_PYTHON_H_
