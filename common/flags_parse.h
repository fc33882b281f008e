// absl::ParseCommandLine, except that a flag value the flags library cannot
// parse (`--threads=abc`, `--threads=99999999999` for an int) exits 2, the
// usage-error status of every rsslab binary, instead of the library's 1.
// --help and friends keep the library's behaviour.
//
//   std::vector<char*> args = rsslab::ParseFlags(argc, argv);

#ifndef RSSLAB_COMMON_FLAGS_PARSE_H_
#define RSSLAB_COMMON_FLAGS_PARSE_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace rsslab {

std::vector<char*> ParseFlags(int argc, char** argv);

// Every value a repeatable flag was given, in order: `--NAME=V`, `-NAME=V`,
// `--NAME V` (absl keeps only the last of repeated flags). Stops at "--".
//   rsslab_agent --allow_command=a=/x --allow_command=b=/y  ->  {"a=/x", "b=/y"}
std::vector<std::string> RepeatedFlagValues(int argc, char** argv, absl::string_view name);

}  // namespace rsslab

#endif  // RSSLAB_COMMON_FLAGS_PARSE_H_
