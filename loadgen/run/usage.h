// rsslab_loadgen's --help: the usage message naming every subcommand, and
// --help / --helpshort listing the flags defined under loadgen/ only.
//
//   rsslab::SetLoadgenUsage();   // before rsslab::ParseFlags
#ifndef RSSLAB_LOADGEN_RUN_USAGE_H_
#define RSSLAB_LOADGEN_RUN_USAGE_H_

namespace rsslab {

void SetLoadgenUsage();

}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_RUN_USAGE_H_
