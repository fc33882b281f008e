#include "python/native/gil_runner.h"

#include "python/native/tracked_threads.h"

namespace rsslab {
namespace py {

GilRunner& Gil() {
  static GilRunner* r = [] {
    GilRunnerOptions o;
    o.with_gil = WithGil;
    o.shutting_down = ShuttingDown;
    o.who = "the package's Python thread";
    return new GilRunner(std::move(o));
  }();
  return *r;
}

}  // namespace py
}  // namespace rsslab
