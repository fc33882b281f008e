// The one way rsslab reads a file a user named (a token, TLS files,
// profiles, scenarios, the handler): with a size limit suited to its kind,
// and only if it is a regular file. And the one way it writes a whole file
// (WriteFileAtomically, at the end).
//
// Why: `--scenario=/dev/zero` once grew the loadgen past 23 GB, and a FIFO
// blocks a plain open() forever. Here a device, FIFO, socket or directory is
// refused with one line before a byte is read (the open is non-blocking, so
// a FIFO without a writer cannot hang it), and a file larger than the limit
// is refused without being read.
//
// Example:
//   absl::StatusOr<std::string> t = ReadFileBounded(path, kTokenFileMaxBytes, "--auth_token_file");
//   // "--auth_token_file: /dev/zero is a character device, not a regular file"

#ifndef RSSLAB_COMMON_FILES_H_
#define RSSLAB_COMMON_FILES_H_

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace rsslab {

// Limits per kind of file (docs/RELIABILITY.md lists them).
inline constexpr int64_t kTokenFileMaxBytes = 4 << 10;      // a bearer token's first line
inline constexpr int64_t kTlsFileMaxBytes = 1 << 20;        // PEM chains, keys, CAs
inline constexpr int64_t kProfilesFileMaxBytes = 1 << 20;   // allocator profiles
inline constexpr int64_t kScenarioFileMaxBytes = 4 << 20;   // loadgen scenarios
inline constexpr int64_t kHandlerFileMaxBytes = 16 << 20;   // a handler .py
inline constexpr int64_t kStateFileMaxBytes = 16 << 20;     // the agent's state file
inline constexpr int64_t kAgentsFileMaxBytes = 64 << 10;    // --agents_file: HOST:PORT lines
// A run's events.jsonl (`report`, --resume): read whole into memory.
inline constexpr int64_t kEventsFileMaxBytes = int64_t{1} << 30;

// The contents of `path`; `what` (a flag name or a description) starts
// every error. NOT_FOUND when it cannot be opened, INVALID_ARGUMENT when it
// is not a regular file or is larger than `max_bytes`.
absl::StatusOr<std::string> ReadFileBounded(const std::string& path, int64_t max_bytes,
                                            absl::string_view what);

// The same checks without reading: `path` exists, is a regular file and is
// at most `max_bytes` (for files another component reads, e.g. the handler
// CPython imports).
absl::Status CheckRegularFile(const std::string& path, int64_t max_bytes, absl::string_view what);

// Refuses a secret file that its group or others may read or write (mode &
// 077), as OpenSSH does for private keys; the message gives the chmod.
absl::Status CheckPrivateFile(const std::string& path, absl::string_view what);

// The one way rsslab writes a whole file (summaries, merged events, the
// agent's state): `text` goes to a new temporary file beside `path`, is
// fsync'ed, and is renamed over `path`. A reader therefore sees the old file
// or the new one, never a torn one, even if the writer dies midway (which
// leaves a hidden .NAME.tmp-PID-N beside it); the temporary file is removed
// on every failure reported. `mode` is the new file's
// permission bits before the umask (0600 for a secret). Errors name `path`
// and the system's reason: "cannot write /x/summary.md: No such file or
// directory".
absl::Status WriteFileAtomically(const std::string& path, absl::string_view text,
                                 mode_t mode = 0666);

// `dir` and its missing parents (0755), as `mkdir -p`; the error names the
// first one that cannot be made: "cannot create /x/y: Permission denied".
absl::Status MakeDirs(const std::string& dir);

}  // namespace rsslab

#endif  // RSSLAB_COMMON_FILES_H_
