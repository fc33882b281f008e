#!/bin/bash
# //deploy/grafana:exporter_rules_test: the exporter's recording and
# alerting rules are valid (promtool check rules) and compute what
# exporter_rules_test.yml expects (promtool test rules); prometheus.yml is
# a valid configuration as shipped and with its commented http_sd job in.
set -euo pipefail
dir="$(dirname "$(readlink -f "$0")")"
[ -f "$dir/exporter_rules.yml" ] || dir="${TEST_SRCDIR}/rsslab/deploy/grafana"
command -v promtool >/dev/null || { echo "promtool not found: apt-get install prometheus" >&2; exit 1; }
work="${TEST_TMPDIR:-$(mktemp -d)}"
cp "$dir/exporter_rules.yml" "$dir/exporter_rules_test.yml" "$dir/prometheus.yml" "$work/"
cd "$work"
promtool check rules exporter_rules.yml
promtool test rules exporter_rules_test.yml
promtool check config prometheus.yml
grep -q "job_name: rsslab_exporter" prometheus.yml
# The commented alternative, uncommented: the scrape of the workers' own /metrics.
sed -n '/^  # - job_name: rsslab_workers/,$p' prometheus.yml | sed 's/^  # /  /' > sd_job.yml
grep -q "http_sd_configs" sd_job.yml
{ grep -v '^  #' prometheus.yml; cat sd_job.yml; } > with_sd.yml
promtool check config with_sd.yml
echo "exporter_rules_test: 1 passed, 0 failed"
