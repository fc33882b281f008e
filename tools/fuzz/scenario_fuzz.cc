// libFuzzer target: a scenario file as the loadgen reads it. Text format
// and validation (ParseScenario), then, for a scenario it accepts, the plan
// that would run (BuildPlan) and the header record that carries it into
// events.jsonl (EventToJson): that JSON must parse back and print the same
// (at about 100 repeat levels it was once written truncated). Run via
// tools/fuzz.sh.
//
// Deep scenarios (5,000 nested `repeat` levels crashed the
// loadgen) without a 100 KB corpus file: an input starting with 'D' is its
// remaining bytes wrapped in N `step { repeat { times: 1 ... } }` levels,
// N (0..8191) from its second and third bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "google/protobuf/util/json_util.h"
#include "loadgen/plan.h"
#include "loadgen/results/event_log.h"
#include "loadgen/scenario.h"
#include "proto/results.pb.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view in(reinterpret_cast<const char*>(data), size);
  std::string text;
  if (size >= 3 && data[0] == 'D') {
    const int depth = ((data[1] << 8) | data[2]) & 0x1fff;
    in.remove_prefix(3);
    for (int i = 0; i < depth; ++i) text += "step { repeat { times: 1 ";
    text.append(in.data(), in.size());
    for (int i = 0; i < depth; ++i) text += " } }";
  } else {
    text.assign(in.data(), in.size());
  }
  rsslab::v1::LoadSpec flags;
  absl::StatusOr<rsslab::v1::Scenario> s = rsslab::ParseScenario(text, "fuzz", flags);
  if (!s.ok()) return 0;
  (void)rsslab::BuildPlan(*s, flags);
  rsslab::v1::Event header;
  *header.mutable_header()->mutable_scenario() = *s;
  const std::string json = rsslab::EventToJson(header);
  rsslab::v1::Event back;
  if (!google::protobuf::util::JsonStringToMessage(json, &back).ok()) abort();
  if (rsslab::EventToJson(back) != json) abort();
  return 0;
}
