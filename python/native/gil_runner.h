// The package's one GIL deadline runner (common/gil_runner.h) for Python
// work from native threads (the Control service's, /metrics): a thread
// holding the GIL in a long C call must not stall a snapshot whose other
// sections need no Python.
//
// Example (GIL not held):
//   std::string why;
//   if (!Gil().RunWithin([&] { ...Python C API... }, absl::Seconds(2), &why)) {
//     snapshot.mutable_python()->set_unavailable(why);
//   }

#ifndef RSSLAB_PYTHON_NATIVE_GIL_RUNNER_H_
#define RSSLAB_PYTHON_NATIVE_GIL_RUNNER_H_

#include "common/gil_runner.h"

namespace rsslab {
namespace py {

// Takes the GIL with PyGILState (tracked_threads.h) and refuses once the
// interpreter shuts down. Never destroyed: native threads may still call it
// while the interpreter exits.
GilRunner& Gil();

}  // namespace py
}  // namespace rsslab

#endif  // RSSLAB_PYTHON_NATIVE_GIL_RUNNER_H_
