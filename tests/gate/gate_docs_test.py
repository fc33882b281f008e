#!/usr/bin/python3
"""docs/GATE.md's CI jobs: both YAML blocks parse (python3-yaml), each is
the job it says (a GitHub Actions workflow on pull requests, a GitLab CI
job on merge requests), each runs `rsslab_loadgen gate`, both gate
commands use the same flags, and every flag they use is one the loadgen
has (its --helpfull). Both let "can't tell" (exit 3) pass and fail on 1
and 2.
"""

import os
import re
import shlex
import subprocess
import sys

import yaml

WS = os.path.join(os.environ.get("TEST_SRCDIR", ""), "rsslab")
sys.path.insert(0, os.path.join(WS, "python/tests"))
from package_tree import check, failures  # noqa: E402

LOADGEN = os.path.join(WS, "loadgen/rsslab_loadgen")
doc = open(os.path.join(WS, "docs/GATE.md")).read()
blocks = re.findall(r"```yaml\n(.*?)```", doc, re.S)
check(len(blocks) == 2, "GATE.md has two yaml blocks (GitHub Actions, GitLab CI)")
github, gitlab = (yaml.safe_load(b) for b in blocks[:2])

helpfull = subprocess.run([LOADGEN, "--helpfull"], capture_output=True, text=True).stdout
known = set(re.findall(r"^\s+--([a-z_0-9]+) \(", helpfull, re.M))
check("base_rev" in known and "scale" in known, "--helpfull lists the loadgen's flags")


def gate_flags(script):
    """The --flags of the `rsslab_loadgen gate` command in a shell script."""
    words = shlex.split(script.replace("\\\n", " "), comments=True)
    start = next((i for i, w in enumerate(words) if w.endswith("rsslab_loadgen")
                  and i + 1 < len(words) and words[i + 1] == "gate"), None)
    if start is None:
        return None
    flags = []
    for w in words[start + 2:]:
        if w in ("||", "&&", ";"):
            break
        if w.startswith("--"):
            flags.append(w[2:].split("=", 1)[0])
    return flags


# GitHub Actions: on pull_request, a step running the gate.
check(github.get("on") == "pull_request" or github.get(True) == "pull_request",
      "GitHub: runs on pull_request")
steps = github["jobs"]["gate"]["steps"]
runs = [s["run"] for s in steps if "run" in s]
gh = next((f for f in map(gate_flags, runs) if f), None)
check(gh is not None, "GitHub: a step runs rsslab_loadgen gate")
gh_script = next((r for r in runs if gate_flags(r)), "")
check('"$rc" -eq 3' in gh_script and 'exit "$rc"' in gh_script,
      "GitHub: exit 3 (can't tell) is a warning, any other failure fails the job")

# GitLab CI: on merge requests, the script running the gate, exit 3 allowed.
job = gitlab["memory-gate"]
check(any("merge_request_event" in r.get("if", "") for r in job["rules"]),
      "GitLab: runs on merge requests")
gl = next((f for f in map(gate_flags, job["script"]) if f), None)
check(gl is not None, "GitLab: the script runs rsslab_loadgen gate")
check(job.get("allow_failure", {}).get("exit_codes") == [3], "GitLab: exit 3 (can't tell) allowed")

for name, flags in (("GitHub", gh or []), ("GitLab", gl or [])):
    unknown = [f for f in flags if f not in known]
    check(not unknown, "%s: every flag of the gate command exists (unknown: %s)" % (name, unknown))
    check({"base_rev", "head_rev", "service", "report_md"} <= set(flags),
          "%s: gates base against head commits with a report" % name)
check(sorted(gh or []) == sorted(gl or []), "both jobs run the same gate command")
sys.exit(1 if failures else 0)
