// absl::ParseCommandLine, except that a flag value the flags library cannot
// parse (`--threads=abc`, `--threads=99999999999` for an int) exits 2, the
// usage-error status of every rsslab binary, instead of the library's 1.
// --help and friends keep the library's behaviour.
//
//   std::vector<char*> args = rsslab::ParseFlags(argc, argv);

#ifndef RSSLAB_COMMON_FLAGS_PARSE_H_
#define RSSLAB_COMMON_FLAGS_PARSE_H_

#include <vector>

namespace rsslab {

std::vector<char*> ParseFlags(int argc, char** argv);

}  // namespace rsslab

#endif  // RSSLAB_COMMON_FLAGS_PARSE_H_
