#include "loadgen/run/usage.h"

#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"

namespace rsslab {

void SetLoadgenUsage() {
  absl::FlagsUsageConfig cfg;
  cfg.contains_help_flags = [](absl::string_view f) {
    return absl::StrContains(f, "loadgen/");
  };
  cfg.contains_helpshort_flags = cfg.contains_help_flags;
  absl::SetFlagsUsageConfig(cfg);
  absl::SetProgramUsageMessage(
      "drives an rsslab_server over gRPC and scripts its phases.\n"
      "  rsslab_loadgen [run] --builtin=seed [--scale=0.1] [--target=H:P --control=H:P]\n"
      "  rsslab_loadgen --scenario=FILE | --requests=N | --duration=30s [load flags]\n"
      "  rsslab_loadgen --target=http://H:P/PATH [--http_version=h2c --connections=N] [load flags]\n"
      "      an HTTP service (HTTP/1.1 keep-alive or h2c) instead of gRPC\n"
      "  rsslab_loadgen --builtin=sweep --agent=H:P [--profiles=a,b --threads_list=1,4 --repeats=N]\n"
      "  rsslab_loadgen sweep ...   the same as --builtin=sweep ...\n"
      "  rsslab_loadgen --builtin=sweep ... --print_cells [--json]   the numbered cells\n"
      "  rsslab_loadgen --builtin=sweep ... --cells=3 --local [--results_dir=DIR]   one cell here\n"
      "  rsslab_loadgen merge --out=DIR RUN_DIR...   one sweep from run directories of one matrix\n"
      "  rsslab_loadgen report RUN_DIR...   rebuild summaries from events.jsonl\n"
      "  rsslab_loadgen compare BASE NEW [--fail_if='rss_after_idle>+10%'] [--format=md|--json]\n"
      "      [--gate=rss --floor_mib=1 --floor_pct=5] [--ignore_fingerprint=FIELD,...]\n"
      "  rsslab_loadgen gate --service=CMD [--head_command=CMD | --base_dir/--head_dir=DIR |\n"
      "      --base_rev/--head_rev=REV --build=SH] [--report_md=FILE] [run flags]   base against head");
}

}  // namespace rsslab
