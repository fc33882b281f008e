// The one way rsslab echoes text it did not write (a client's field, a
// handler's exception, a scenario string, a peer's error) into a message, a
// log line or the terminal: control bytes (ESC, CR, LF, NUL, DEL, ...) are
// escaped, so the text cannot forge a log line or drive the terminal, and it
// is cut to a stated length, so a 10 MB input cannot flood stderr.
//
// Example:
//   Echo("boom\r\n\x1b[2Jfake line", 64)  // "boom\\r\\n\\x1b[2Jfake line"
//   Echo(std::string(1 << 20, 'x'), 16)   // "xxxxxxxxxxxxxxxx... (1048576 bytes)"
//   Echo("a\u202eb")                      // "a\\u202eb": no reordered text
//   EchoMultiline(traceback, 4096)        // keeps LF (a traceback's lines), escapes the rest

#ifndef RSSLAB_COMMON_UNTRUSTED_TEXT_H_
#define RSSLAB_COMMON_UNTRUSTED_TEXT_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace rsslab {

// What one echoed value may take at most, unless a caller says otherwise.
inline constexpr size_t kEchoMaxBytes = 256;

// Bytes below 0x20 and 0x7F as \n, \r, \t or \xNN, and a backslash as \\ (so
// the escaped text cannot be read as something else); bytes that are not
// valid UTF-8 as \xNN too; the valid UTF-8 of code points that act unseen
// (C1 controls U+0080-U+009F, bidirectional marks, embeddings, overrides and
// isolates U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069, line and
// paragraph separators U+2028, U+2029) as \uNNNN; other valid UTF-8 and
// printable ASCII as they are.
// At most `max_bytes` of the input are shown; a
// longer input ends in "... (N bytes)".
std::string Echo(absl::string_view s, size_t max_bytes = kEchoMaxBytes);

// The same, except that LF stays a line break (for multi-line text such as a
// Python traceback, written as a block). CR, ESC and the rest are escaped.
std::string EchoMultiline(absl::string_view s, size_t max_bytes);

// JSON text (protobuf's, which leaves some of them as they are) with the code
// points Echo shows as \uNNNN escaped the same way: still the same JSON
// values (they can only be inside strings), but safe to print.
std::string JsonInvisibleEscaped(absl::string_view json);

// Strict UTF-8: no stray continuation bytes, overlongs, surrogates, cut
// sequences or code points past U+10FFFF (what CPython's decoder and
// protobuf's string fields want).
bool IsValidUtf8(absl::string_view s);

// `s` with every byte that is not part of valid UTF-8 replaced by U+FFFD
// (for a protobuf string field, which must hold UTF-8; control bytes kept:
// escape them with Echo where the text is printed).
std::string ValidUtf8(absl::string_view s);

}  // namespace rsslab

#endif  // RSSLAB_COMMON_UNTRUSTED_TEXT_H_
