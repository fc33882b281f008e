// A message made fit for JSON output: every string field (nested messages,
// repeated fields and map entries included) that is not valid UTF-8 gets its
// bad bytes escaped as \xNN (common/untrusted_text.h), so protobuf's JSON printer
// neither logs "invalid UTF-8" nor writes bytes a JSON reader refuses.
//
// Why: strings in rsslab's output come from peers and processes (thread
// names from /proc, a server's error text, a handler's names); a thread
// named with a stray 0xff byte once made `--json` log protobuf errors.
//
//   rsslab::v1::Snapshot copy = snapshot;
//   rsslab::ReplaceInvalidUtf8(&copy);   // then MessageToJsonString(copy, ...)
//   rsslab::ReplaceInvalidUtf8(&report, rsslab::Utf8Fix::kReplacement);
#ifndef RSSLAB_COMMON_UTF8_MESSAGE_H_
#define RSSLAB_COMMON_UTF8_MESSAGE_H_

#include "google/protobuf/message.h"

namespace rsslab {

// How a string that is not valid UTF-8 is made valid.
enum class Utf8Fix {
  kEscape,       // bad bytes as \xNN, control bytes escaped (common/untrusted_text.h's Echo)
  kReplacement,  // bad bytes as U+FFFD, the rest kept (ValidUtf8): for a report
                 // whose text printer escapes what it prints anyway
};

// Returns how many string values were changed (map keys and values
// included). Valid strings, and bytes fields, are left as they are.
int ReplaceInvalidUtf8(google::protobuf::Message* m, Utf8Fix fix = Utf8Fix::kEscape);

}  // namespace rsslab

#endif  // RSSLAB_COMMON_UTF8_MESSAGE_H_
