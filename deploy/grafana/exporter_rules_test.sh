#!/bin/bash
# //deploy/grafana:exporter_rules_test: the exporter's recording and
# alerting rules are valid (promtool check rules) and compute what
# exporter_rules_test.yml expects (promtool test rules).
set -euo pipefail
dir="$(dirname "$(readlink -f "$0")")"
[ -f "$dir/exporter_rules.yml" ] || dir="${TEST_SRCDIR}/rsslab/deploy/grafana"
command -v promtool >/dev/null || { echo "promtool not found: apt-get install prometheus" >&2; exit 1; }
work="${TEST_TMPDIR:-$(mktemp -d)}"
cp "$dir/exporter_rules.yml" "$dir/exporter_rules_test.yml" "$work/"
cd "$work"
promtool check rules exporter_rules.yml
promtool test rules exporter_rules_test.yml
echo "exporter_rules_test: 1 passed, 0 failed"
