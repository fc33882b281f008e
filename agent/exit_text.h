// How a launcher tells how a child ended: its wait status as text and the
// tail of its log.
//
// Example:
//   std::cerr << "server " << rsslab::launch::DescribeExit(status) << ":\n"
//             << rsslab::launch::LogTail(log_path);
#ifndef RSSLAB_AGENT_EXIT_TEXT_H_
#define RSSLAB_AGENT_EXIT_TEXT_H_

#include <string>

namespace rsslab {
namespace launch {

// "exited 0", "exited 1", "killed by SIGKILL", from a waitpid status.
std::string DescribeExit(int wait_status);

// The last `max_lines` lines of a file (at most the last 8 KiB of it).
std::string LogTail(const std::string& path, int max_lines = 20);

}  // namespace launch
}  // namespace rsslab

#endif  // RSSLAB_AGENT_EXIT_TEXT_H_
