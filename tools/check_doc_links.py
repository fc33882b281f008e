#!/usr/bin/python3
"""Checks that README.md, docs/*.md and docs/start/*.md hold no dangling link and that the
README's layout section matches the tree.

    tools/check_doc_links.py [ROOT]     # ROOT: the checkout, default: this script's ../
    tools/check_doc_links.py --no_git   # as from a source archive: walk the tree, skip what
                                        # .gitignore names (by path: /results/ is not loadgen/results/)

Exit 0 when everything resolves; otherwise one line per problem
(FILE:LINE: what is wrong) and exit 1. Exit 2 for a bad invocation.

What is checked, and why:
- Every relative link and image, [text](path) or [text](path#anchor), names a
  file or directory that exists, so a reader who follows it lands somewhere.
  http(s) and mailto links are not fetched (the check runs offline).
- An #anchor into a Markdown file names one of its headings, slugged the way
  GitHub renders them, so a moved or renamed section is caught.
- Every Bazel label written as //package:target (or //package for the
  target named after its directory) names a package that exists and a
  target its BUILD file declares or a file in it, so a renamed or moved
  target is caught. //... and placeholders in capitals are skipped.
- The fenced block under the README's "## Layout" heading lists only paths
  that exist, and every top-level directory of the checkout (git-tracked
  when git can tell, else every directory .gitignore does not name), so the
  README and the tree cannot drift apart silently. It also names every
  directory one level down that holds files (common/growth/): on a line of
  its own, or as growth/ in its parent's entry (the parent's line and the
  indented lines under it), so a new folder is not left out of the map.
- Every docs/*.md is linked from README.md, so no document is reachable
  only by browsing the folder.
- Every test target a BUILD file declares (any rule ending in _test) is
  named as `//package:target` in docs/TESTING.md, so a new test cannot be
  left out of the list of what the suite covers.
- Every --flag written in README.md or docs/*.md is a flag some program
  of the checkout defines (ABSL_FLAG in C++, the flags rsslab_run parses
  by hand, a Python script's "--name" strings, a shell script's case
  patterns), or one of the other tools' flags listed in OTHER_TOOLS_FLAGS
  below, so a renamed or removed flag is caught where a doc still names
  it. `--name_*` stands for a family and needs one member.
- README.md is at most README_MAX_LINES lines: it is the front door; the
  depth goes in docs/.
- README.md and every usage page (docs/**/*.md but docs/results/ and the
  generated docs/sweep/summary.md) are at most USAGE_MAX_LINES lines:
  measurements go into result pages, usage pages link to them.
- Every result page, docs/results/YYYY-MM-DD-name.md, states how its
  figures were taken: a table row each for Command, Commit, Machine, Load
  average and Date, the Date the one in its name, and is listed in
  docs/results/README.md.
- A figure a page quotes from a result is written with a marker naming
  its source, `181.4 MiB<!-- fig: results/2026-12-06-sweep.md#mimalloc3-1t-load -->`
  (the path relative to the page, as a link); the result page lists the
  figure in its "Figures" table, a row `` | `KEY` | FIGURE | what | ``. The
  text just before the marker must end with that FIGURE exactly, so a
  figure that drifts from its source fails here and each figure has one
  source.
- Every test time in docs/TESTING.md's tables is the one the test-times
  result page it links (docs/results/YYYY-MM-DD-...test-times.md, the
  newest it names) records for that target, with the commit that
  measured it (check_test_times).
- In a usage page, a sentence that says "measured" and states a number
  with a decimal point followed by " MiB" or "x" (12.5 MiB, 2.13x) carries
  a marker right after that number: a measurement is quoted from its
  result, not restated (check_unquoted_measurements).
- docs/METRICS.md names only metrics the code exports (check_metric_names).
- The product holds nothing of the machine it was written on and nothing
  about how it was written: no absolute paths of the build machine, no lock
  files or `flock` on them, no words about who works on it or where (the
  patterns are MACHINE_PATTERNS and TEAM_PATTERNS below, the one place that
  names them). A page says what the product does and what was measured,
  with the machine described by what it is (cores, load average).
Links inside fenced code blocks and `code spans` are not links and are not
checked.
"""

import fnmatch
import os
import re
import subprocess
import sys


# Without git (a source archive), what is generated is told by path, from
# the checkout's own .gitignore: "/results/" is the top-level results
# directory only (loadgen/results/ is source), "__pycache__/" is any
# directory of that name. USE_GIT is False under --no_git.
USE_GIT = True


def ignore_rules(root):
    """(anchored paths, names anywhere) from ROOT/.gitignore, plus .git."""
    anchored, anywhere = [], [".git"]
    try:
        with open(os.path.join(root, ".gitignore"), encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if not line or line.startswith(("#", "!")):
                    continue
                line = line.rstrip("/")
                if line.startswith("/"):
                    anchored.append(line[1:])
                elif "/" in line:
                    anchored.append(line)
                else:
                    anywhere.append(line)
    except OSError:
        pass
    return anchored, anywhere


def is_generated(root, rel):
    """Whether the directory ROOT/REL is ignored (generated or local)."""
    anchored, anywhere = ignore_rules(root)
    return (any(fnmatch.fnmatchcase(rel, p) for p in anchored)
            or any(fnmatch.fnmatchcase(os.path.basename(rel), p) for p in anywhere))

LINK_RE = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING_RE = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE_RE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN_RE = re.compile(r"(`+)(.+?)\1")
# A label starts a word (not "@repo//", not "http://host").
LABEL_RE = re.compile(r"(?<![\w:/@])//([a-z0-9_][a-z0-9_/.-]*|)(?::([A-Za-z0-9_.+-]+))?")
BUILD_NAME_RE = re.compile(r"\bname\s*=\s*\"([^\"]+)\"")
HTML_ANCHOR_RE = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")


def github_slug(heading):
    """The anchor GitHub gives a heading: markup dropped, lower case,
    punctuation removed except '-' and '_', spaces to '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links -> their text
    text = text.replace("`", "")
    text = re.sub(r"<[^>]+>", "", text)
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def prose_lines(path):
    """(line number, text) of the lines outside fenced code blocks."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    fence = None
    for n, line in enumerate(lines, 1):
        m = FENCE_RE.match(line)
        if m:
            if fence is None:
                fence = m.group(1)
            elif m.group(1) == fence:
                fence = None
            continue
        if fence is None:
            yield n, line


def anchors_of(path, cache={}):
    if path not in cache:
        seen = {}
        anchors = set()
        for _, line in prose_lines(path):
            for a in HTML_ANCHOR_RE.findall(line):
                anchors.add(a)
            m = HEADING_RE.match(line)
            if not m:
                continue
            slug = github_slug(m.group(2))
            if slug in seen:
                seen[slug] += 1
                anchors.add("%s-%d" % (slug, seen[slug]))
            else:
                seen[slug] = 0
                anchors.add(slug)
        cache[path] = anchors
    return cache[path]


def check_links(root, md):
    problems = []
    rel = os.path.relpath(md, root)
    for n, line in prose_lines(md):
        line = CODE_SPAN_RE.sub("", line)
        for target in LINK_RE.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            if path:
                dest = os.path.normpath(os.path.join(os.path.dirname(md), path))
                if not os.path.exists(dest):
                    problems.append("%s:%d: link to %s: no such file or directory" % (rel, n, target))
                    continue
                if not os.path.realpath(dest).startswith(os.path.realpath(root) + os.sep):
                    problems.append("%s:%d: link to %s leaves the repository" % (rel, n, target))
                    continue
            else:
                dest = md
            if anchor:
                if not dest.endswith(".md"):
                    problems.append("%s:%d: link to %s: an anchor into a file that is not Markdown" % (rel, n, target))
                elif anchor not in anchors_of(dest):
                    problems.append("%s:%d: link to %s: %s has no heading with anchor #%s" %
                                    (rel, n, target, os.path.relpath(dest, root), anchor))
    return problems


def targets_of(root, package, cache={}):
    """The names a package's BUILD file declares, or None if there is no
    such package."""
    if package not in cache:
        names = None
        for build in ("BUILD.bazel", "BUILD"):
            path = os.path.join(root, package, build)
            if os.path.isfile(path):
                with open(path, encoding="utf-8") as f:
                    names = set(BUILD_NAME_RE.findall(f.read()))
                break
        cache[package] = names
    return cache[package]


def check_labels(root, md):
    """Bazel labels anywhere in the file, code included: commands such as
    `bazel test //tests:server_test` are where they matter most."""
    problems = []
    rel = os.path.relpath(md, root)
    with open(md, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for n, line in enumerate(lines, 1):
        for m in LABEL_RE.finditer(line):
            package, target = m.group(1).rstrip("/."), m.group(2)
            if m.group(1).endswith("...") or line[m.end():m.end() + 3] == "...":
                continue
            if target is None:
                if not package:
                    continue  # a bare "//"
                target = package.rsplit("/", 1)[-1]
            label = "//%s:%s" % (package, target)
            names = targets_of(root, package)
            if names is None:
                problems.append("%s:%d: %s: no package %s (no BUILD file)" %
                                (rel, n, m.group(0), package or "//"))
            elif target not in names and not os.path.exists(os.path.join(root, package, target)):
                problems.append("%s:%d: %s: %s declares no target %s" %
                                (rel, n, m.group(0), os.path.join(package, "BUILD.bazel"), label))
    return problems


def top_level_dirs(root):
    """The checkout's top-level directories: git-tracked ones when git can
    tell (so an untracked scratch directory does not fail the check), else
    every directory but the generated ones."""
    tracked = {p.split("/", 1)[0] for p in git_files(root) if "/" in p}
    if tracked:
        return tracked
    return {d for d in os.listdir(root)
            if os.path.isdir(os.path.join(root, d)) and not os.path.islink(os.path.join(root, d))
            and not is_generated(root, d)}


def second_level_dirs(root):
    """Every TOP/SUB directory that holds a file (at any depth): from git's
    list when git can tell, else from the walk that skips what .gitignore
    names."""
    return {"/".join(p.split("/")[:2]) for p in tracked_files(root) if p.count("/") >= 2}


def layout_entries(lines, start):
    """The Layout block after line index START: a list of (line number,
    paths, text), one per entry. An entry is a line that starts with one
    path or a comma-separated list of paths (directories end in '/'), up to
    the first run of two spaces, then what it holds; indented lines below
    continue its text. None if there is no fenced block."""
    i = start + 1
    while i < len(lines) and not FENCE_RE.match(lines[i]):
        if lines[i].startswith("#"):
            return None
        i += 1
    if i == len(lines):
        return None
    entries = []
    i += 1
    while i < len(lines) and not FENCE_RE.match(lines[i]):
        line = lines[i]
        i += 1
        if not line.strip():
            continue
        if line[0].isspace():
            if entries:
                entries[-1][2].append(line.strip())
            continue
        parts = re.split(r"\s{2,}", line.strip(), maxsplit=1)
        head, text = parts[0], parts[1] if len(parts) > 1 else ""
        paths = [t.strip() for t in head.split(",") if t.strip()]
        entries.append((i, paths, [text]))
    return [(n, paths, " ".join(text)) for n, paths, text in entries]


def named_subdirs(entries):
    """The TOP/SUB directories the Layout block names: as an entry's path,
    as a full path anywhere in its text, or as SUB/ in the text of TOP/'s
    entry."""
    named = set()
    for _, paths, text in entries:
        for p in paths:
            if p.endswith("/") and p.count("/") == 2:
                named.add(p[:-1])
        for m in re.finditer(r"(?<![\w./-])([\w.-]+/[\w.-]+)/", text):
            named.add(m.group(1))
        for top in [p[:-1] for p in paths if p.endswith("/") and p.count("/") == 1]:
            for m in re.finditer(r"(?<![\w./-])([\w.-]+)/", text):
                named.add("%s/%s" % (top, m.group(1)))
    return named


def check_layout(root, readme):
    """The README's "## Layout" block lists paths that exist, every
    top-level directory and every directory one level down (see
    layout_entries for its shape)."""
    with open(readme, encoding="utf-8") as f:
        lines = f.read().split("\n")
    rel = os.path.relpath(readme, root)
    start = next((i for i, l in enumerate(lines) if re.match(r"^##\s+Layout\s*$", l)), None)
    if start is None:
        return ["%s: no '## Layout' section" % rel]
    entries = layout_entries(lines, start)
    if entries is None:
        return ["%s:%d: the Layout section has no fenced block" % (rel, start + 1)]
    problems = []
    listed_top = {}  # top-level directory -> the line of its entry
    for n, paths, _ in entries:
        for token in paths:
            path = os.path.join(root, token)
            if token.endswith("/"):
                if not os.path.isdir(path):
                    problems.append("%s:%d: layout lists %s, which is not a directory here" % (rel, n, token))
                    continue
                if token.count("/") == 1:
                    listed_top.setdefault(token[:-1], n)
            elif not os.path.exists(path):
                problems.append("%s:%d: layout lists %s, which does not exist" % (rel, n, token))
    tops = top_level_dirs(root)
    for d in sorted(tops - set(listed_top)):
        problems.append("%s:%d: the Layout section does not list the top-level directory %s/" % (rel, start + 1, d))
    named = named_subdirs(entries)
    for d in sorted(second_level_dirs(root) - named):
        top, sub = d.split("/")
        if top not in tops:
            continue
        problems.append("%s:%d: the Layout section does not name %s/: give it a line, or name %s/ in %s/'s "
                        "entry" % (rel, listed_top.get(top, start + 1), d, sub, top))
    return problems


def check_docs_linked(root, readme, docs):
    """Every docs/*.md (DOCS) is the target of a link in README.md."""
    linked = set()
    for _, line in prose_lines(readme):
        for target in LINK_RE.findall(CODE_SPAN_RE.sub("", line)):
            path = target.partition("#")[0]
            if path and not re.match(r"^[a-z][a-z0-9+.-]*:", path):
                linked.add(os.path.normpath(os.path.join(os.path.dirname(readme), path)))
    return ["README.md: %s is not linked from README.md (add it to the Documentation table)" %
            os.path.relpath(md, root) for md in docs if os.path.normpath(md) not in linked]


# Flags of programs that are not part of the checkout, which the docs show
# in commands: the check cannot read their sources, so they are named here.
OTHER_TOOLS_FLAGS = {
    "bazel": {"config", "disk_cache", "keep_going", "local_test_jobs", "nocache_test_results",
              "output_base",
              "platform_suffix", "repo_env", "runs_per_test", "symlink_prefix", "test_filter",
              "test_output"},
    "sbatch": {"array", "cpus", "dependency", "export"},  # --cpus-per-task
    "kubectl": {"for", "image", "now", "overrides"},
    "protoc": {"grpc_out", "plugin", "python_out"},
    "systemctl": {"no"},  # --no-block
    "valgrind": {"tool"},
    "ld, in the extensions' link (docs/PACKAGE.md)": {"as", "exclude"},  # --as-needed ...
    "pkg-config": {"static"},
    "debootstrap": {"variant"},  # docs/TESTING.md's fresh machine
    "unshare": {"mount", "propagation"},
    "mount": {"make"},  # --make-rslave
    "hdrive.py, the driver printed in the appendix of docs/results/2026-12-01-handlers.md": {"preload", "server", "steps"},
    "python3 -m venv": {"system"},  # --system-site-packages
    "a flag docs/LOADGEN.md says rsslab leaves out (no reflection client)": {"reflect"},
    # docs/LOADGEN.md's table against ghz and h2load names their options.
    "ghz": {"connections", "import", "load", "protoset", "rps", "skip"},  # --import-paths ...
    "h2load": {"warm"},  # --warm-up-time; --rps as ghz's
    "Google Benchmark's binaries (bench/template_build)": {"benchmark_repetitions",
                                                           "benchmark_report_aggregates_only"},
    # --max-requests(-jitter), --max-tasks-per-child, --max-memory-per-child,
    # --reload-on-rss: the recycling limits rsslab_exporter reads.
    "gunicorn, uWSGI and Celery": {"max", "reload"},
    "any program": {"help"},
    "a placeholder in prose": {"flag"},
}

DOC_FLAG_RE = re.compile(r"(?<![\w-])--([a-z][a-z0-9_]*[a-z0-9])(_\*)?")


def git_files(root):
    """The files git tracks, or [] without git or a repository."""
    if not USE_GIT:
        return []
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, check=True).stdout.decode()
        return [p for p in out.split("\0") if p]
    except (OSError, subprocess.CalledProcessError):
        return []


def tracked_files(root):
    files = git_files(root)
    if files:
        return files
    found = []
    for d, dirs, names in os.walk(root):
        rel_d = os.path.relpath(d, root)
        dirs[:] = [x for x in dirs
                   if not is_generated(root, os.path.normpath(os.path.join(rel_d, x)))]
        found += [os.path.relpath(os.path.join(d, n), root) for n in names]
    return found


def defined_flags(root):
    """Every flag name a program of the checkout defines."""
    flags = set()
    for rel in tracked_files(root):
        path = os.path.join(root, rel)
        if not os.path.isfile(path) or os.path.islink(path):
            continue
        if rel.endswith((".cc", ".h")):
            patterns = [r"ABSL_FLAG\(\s*[\w:<>, ]+?,\s*(\w+)\s*,",
                        r"value\(\"(\w+)\"", r"== \"--(\w+)\""]
        elif rel.endswith(".py"):
            patterns = [r"[\"']--([\w-]+)[\"'=]"]
        elif rel.endswith(".sh") or rel == "rsslab":
            patterns = [r"--([a-z][\w-]*)(?:=\*|\)|\|)"]
        else:
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        for pat in patterns:
            flags.update(re.findall(pat, text))
    return flags


def check_flags(root, files):
    problems = []
    known = defined_flags(root)
    for names in OTHER_TOOLS_FLAGS.values():
        known |= names
    for md in files:
        rel = os.path.relpath(md, root)
        with open(md, encoding="utf-8") as f:
            lines = f.read().split("\n")
        for n, line in enumerate(lines, 1):
            for m in DOC_FLAG_RE.finditer(line):
                name, family = m.group(1), m.group(2)
                if family:
                    ok = any(k.startswith(name + "_") for k in known)
                else:
                    ok = name in known or (name.startswith("no") and name[2:] in known)
                if not ok:
                    problems.append("%s:%d: --%s%s: no program of the checkout defines this flag" %
                                    (rel, n, name, family or ""))
    return problems


# The metrics reference (docs/METRICS.md) names only metrics a program of
# the checkout exports: each rsslab_* name there (a histogram's _bucket,
# _count and _sum taken off) must stand as a string in the code.
METRIC_NAME_RE = re.compile(r"\brsslab_[a-z0-9_]+")
METRIC_PAGE = os.path.join("docs", "METRICS.md")


def check_metric_names(root):
    page = os.path.join(root, METRIC_PAGE)
    if not os.path.isfile(page):
        return []
    code = []
    for rel in tracked_files(root):
        path = os.path.join(root, rel)
        if rel.endswith((".cc", ".h", ".py")) and os.path.isfile(path) and not os.path.islink(path):
            with open(path, encoding="utf-8", errors="replace") as f:
                code.append(f.read())
    code = "\n".join(code)
    problems, seen = [], set()
    with open(page, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for n, line in enumerate(lines, 1):
        for name in METRIC_NAME_RE.findall(line):
            name = re.sub(r"_(bucket|count|sum)$", "", name)
            if name in seen:
                continue
            seen.add(name)
            if ('"%s' % name) not in code:
                problems.append("%s:%d: %s: no program of the checkout exports a metric of this "
                                "name" % (METRIC_PAGE, n, name))
    return problems


README_MAX_LINES = 250


def check_readme_length(readme):
    with open(readme, encoding="utf-8") as f:
        n = len(f.read().rstrip("\n").split("\n"))
    if n > README_MAX_LINES:
        return ["README.md: %d lines, more than %d: move the depth into docs/" % (n, README_MAX_LINES)]
    return []


TEST_RULE_RE = re.compile(r"\b\w+_test\(\s*name\s*=\s*\"([^\"]+)\"")


def check_test_list(root):
    """Every test target is named in docs/TESTING.md."""
    testing = os.path.join(root, "docs", "TESTING.md")
    if not os.path.isfile(testing):
        return ["docs/TESTING.md: missing"]
    with open(testing, encoding="utf-8") as f:
        listed = f.read()
    problems = []
    for rel in sorted(tracked_files(root)):
        if os.path.basename(rel) not in ("BUILD.bazel", "BUILD"):
            continue
        package = os.path.dirname(rel)
        with open(os.path.join(root, rel), encoding="utf-8") as f:
            for name in TEST_RULE_RE.findall(f.read()):
                label = "//%s:%s" % (package, name)
                if "`%s`" % label not in listed:
                    problems.append("docs/TESTING.md: the test target %s (%s) is not listed" % (label, rel))
    return problems


TEST_ROW_RE = re.compile(r"^\|\s*`(//[^`]+)`\s*\|\s*(.*?)\s*\|")
TEST_TIMES_LINK_RE = re.compile(r"\]\(results/(\d{4}-\d{2}-\d{2}-[a-z0-9.-]*test-times\.md)\)")


def check_test_times(root):
    """Every time in docs/TESTING.md's tables is the one its test-times result page records."""
    testing = os.path.join(root, "docs", "TESTING.md")
    if not os.path.isfile(testing):
        return []
    rows = [(n, m.group(1), m.group(2)) for n, line in prose_lines(testing)
            for m in [TEST_ROW_RE.match(line)] if m]
    with open(testing, encoding="utf-8") as f:
        links = TEST_TIMES_LINK_RE.findall(f.read())
    if not rows:
        return []
    if not links:
        return ["docs/TESTING.md: its test times name no result page results/YYYY-MM-DD-...test-times.md"]
    page = os.path.join(root, "docs", "results", sorted(links)[-1])
    if not os.path.isfile(page):
        return []  # check_links reports the broken link
    recorded = {m.group(1): m.group(2) for _, line in prose_lines(page)
                for m in [TEST_ROW_RE.match(line)] if m}
    problems = []
    for n, label, time in rows:
        if recorded.get(label) != time:
            problems.append("docs/TESTING.md:%d: %s takes '%s' but %s records %s: a test time is "
                            "measured; record it there with the commit that measured it" %
                            (n, label, time, os.path.relpath(page, root),
                             "'%s'" % recorded[label] if label in recorded else "none"))
    return problems


# ------------------------------------------------- how the docs are kept

USAGE_MAX_LINES = 400
RESULTS = os.path.join("docs", "results")
RESULT_NAME_RE = re.compile(r"^(\d{4}-\d{2}-\d{2})-[a-z0-9][a-z0-9.-]*\.md$")
RESULT_FIELDS = ("Command", "Commit", "Machine", "Load average", "Date")
FIELD_ROW_RE = re.compile(r"^\|\s*\**([A-Za-z ]+?)\**\s*\|\s*(.*?)\s*\|\s*$")
FIG_MARK_RE = re.compile(r"<!--\s*fig:\s*([^#\s]+)#([\w.-]+)\s*-->")
FIG_ROW_RE = re.compile(r"^\|\s*`([\w.-]+)`\s*\|\s*(.*?)\s*\|")

# What ties a file to the machine it was written on. Every tracked text
# file is read; "/root/" only in pages (a container's or chroot's /root is
# the product's business in a script or Dockerfile).
MACHINE_PATTERNS = [
    (re.compile(r"(?<![\w.$\"}-])/work/"), "an absolute path of the build machine (/work/)"),
    (re.compile(r"(?<![\w.$\"}-])/home/\w"), "an absolute path of the build machine (/home/...)"),
    (re.compile(r"(?<![\w.$\"}-])/tmp/\S*\.lock\b"), "a lock file of the build machine (/tmp/...lock)"),
    (re.compile(r"\bflock\s+-[a-z]+\s+/"), "a `flock` on a lock file of the build machine"),
]
PAGE_ONLY_PATTERNS = [
    (re.compile(r"(?<![\w.$\"}-])/root/"), "an absolute path of the build machine (/root/)"),
]
# Words about how the product was made rather than what it does.
TEAM_PATTERNS = [
    (re.compile(p, re.I), p.replace("\\b", "")) for p in (
        r"\bengineers?\b", r"\bworktrees?\b", r"\bthis branch\b", r"\bthis commit\b",
        r"\bthe commit before this\b", r"\bother builds\b", r"\bCPU lock\b",
        r"\bour team\b")
]
HYGIENE_SUFFIXES = (".md", ".sh", ".py", ".cc", ".h", ".bazel", ".bzl", ".txt", ".yaml", ".yml",
                    ".service", ".example", ".sbatch", ".textproto", ".txtpb", ".env", ".proto",
                    ".json", ".csv", "Dockerfile", "WORKSPACE", "rsslab")
# This checker names the patterns it looks for.
HYGIENE_SKIP = {"tools/check_doc_links.py"}


def all_pages(root):
    """README.md and every Markdown file under docs/."""
    pages = [os.path.join(root, "README.md")]
    for d, dirs, names in os.walk(os.path.join(root, "docs")):
        dirs.sort()
        pages += sorted(os.path.join(d, n) for n in names if n.endswith(".md"))
    return pages


def is_result(root, md):
    return os.path.dirname(os.path.relpath(md, root)) == RESULTS


def usage_pages(root):
    return [md for md in all_pages(root) if not is_result(root, md)
            and os.path.relpath(md, root) != os.path.join("docs", "sweep", "summary.md")]


def check_usage_length(root):
    problems = []
    for md in usage_pages(root):
        if os.path.basename(md) == "README.md" and os.path.dirname(md) == root:
            continue  # README_MAX_LINES
        with open(md, encoding="utf-8") as f:
            n = len(f.read().rstrip("\n").split("\n"))
        if n > USAGE_MAX_LINES:
            problems.append("%s: %d lines, more than %d: move measurements into docs/results/, "
                            "or split the page" % (os.path.relpath(md, root), n, USAGE_MAX_LINES))
    return problems


def result_figures(md, cache={}):
    """KEY -> FIGURE from a result page's figure rows."""
    if md not in cache:
        figs = {}
        for _, line in prose_lines(md):
            m = FIG_ROW_RE.match(line)
            if m:
                figs[m.group(1)] = m.group(2)
        cache[md] = figs
    return cache[md]


def check_result_pages(root):
    problems = []
    d = os.path.join(root, RESULTS)
    if not os.path.isdir(d):
        return problems
    try:
        with open(os.path.join(d, "README.md"), encoding="utf-8") as f:
            index = f.read()
    except OSError:
        index = ""
    for name in sorted(os.listdir(d)):
        if not name.endswith(".md") or name == "README.md":
            continue
        rel = os.path.join(RESULTS, name)
        m = RESULT_NAME_RE.match(name)
        if not m:
            problems.append("%s: a result page is named YYYY-MM-DD-name.md (lower case)" % rel)
            continue
        fields = {}
        for _, line in prose_lines(os.path.join(d, name)):
            f = FIELD_ROW_RE.match(line)
            if f and f.group(1) in RESULT_FIELDS and f.group(1) not in fields:
                fields[f.group(1)] = f.group(2)
        for field in RESULT_FIELDS:
            if not fields.get(field):
                problems.append("%s: no '| %s | ... |' row (a result says how it was taken)" % (rel, field))
        if fields.get("Date") and not fields["Date"].startswith(m.group(1)):
            problems.append("%s: Date %s is not the date in the page's name (%s)" %
                            (rel, fields["Date"], m.group(1)))
        if "](%s)" % name not in index:
            problems.append("%s: not listed in %s" % (rel, os.path.join(RESULTS, "README.md")))
    return problems


def check_figures(root, md):
    """Each quoted figure is what its source says."""
    problems = []
    rel = os.path.relpath(md, root)
    for n, line in prose_lines(md):
        for m in FIG_MARK_RE.finditer(line):
            path, key = m.group(1), m.group(2)
            src = os.path.normpath(os.path.join(os.path.dirname(md), path))
            if not os.path.isfile(src) or os.path.dirname(os.path.relpath(src, root)) != RESULTS:
                problems.append("%s:%d: fig: %s is not a page under docs/results/" % (rel, n, path))
                continue
            figs = result_figures(src)
            if key not in figs:
                problems.append("%s:%d: fig: %s has no figure `%s` in its Figures table" %
                                (rel, n, os.path.relpath(src, root), key))
                continue
            before = FIG_MARK_RE.sub("", line[:m.start()]).rstrip().rstrip("*_`").rstrip()
            if not before.endswith(figs[key]):
                tail = before[-max(len(figs[key]), 12):]
                problems.append("%s:%d: a figure quoted as '...%s' but %s#%s says '%s'" %
                                (rel, n, tail, os.path.relpath(src, root), key, figs[key]))
    return problems


# A measured figure a usage page states without quoting its result: a
# number with a decimal point followed by " MiB" or "x" in a sentence that
# says "measured" (settings and limits are round numbers; a measured figure
# rarely is). Code spans and the markers themselves are not read.
MEASURED_RE = re.compile(r"\bmeasured\b", re.I)
DECIMAL_FIG_RE = re.compile(r"(?<![\w.+-])\d[\d,]*\.\d+(?: MiB\b|x(?!\w))")
CODE_SPAN_RE = re.compile(r"`[^`]*`")
COMMENT_RE = re.compile(r"<!--.*?-->")
SENTENCE_END_RE = re.compile(r"(?<=[.!?:;])\s+(?=[A-Z(\[*`])")
FIG_AFTER_RE = re.compile(r"\s*\**\s*<!--\s*fig:")


def paragraphs(md):
    """Lists of (line number, text): prose paragraphs, and each table row alone."""
    paras, cur = [], []
    for n, line in prose_lines(md):
        s = line.lstrip()
        if not s or s.startswith(("|", "#")):
            if cur:
                paras.append(cur)
                cur = []
            if s.startswith("|"):
                paras.append([(n, line)])
            continue
        cur.append((n, line))
    if cur:
        paras.append(cur)
    return paras


def check_unquoted_measurements(root, md):
    problems = []
    rel = os.path.relpath(md, root)
    for para in paragraphs(md):
        text, starts = "", []
        for n, line in para:
            starts.append((len(text), n))
            text += line + " "
        blank = lambda m: " " * len(m.group(0))
        masked = COMMENT_RE.sub(blank, CODE_SPAN_RE.sub(blank, text))
        pos = 0
        for sentence in SENTENCE_END_RE.split(masked):
            at = masked.index(sentence, pos)
            pos = at + len(sentence)
            if not MEASURED_RE.search(sentence):
                continue
            for m in DECIMAL_FIG_RE.finditer(sentence):
                if FIG_AFTER_RE.match(text[at + m.end():]):
                    continue
                n = [line_no for start, line_no in starts if start <= at + m.start()][-1]
                problems.append("%s:%d: '%s' in a sentence that says measured, with no "
                                "<!-- fig: results/...#key --> after it: quote it from its result "
                                "page, or move it there" % (rel, n, m.group(0)))
    return problems


def check_hygiene(root):
    problems = []
    for rel in sorted(tracked_files(root)):
        if rel in HYGIENE_SKIP or not rel.endswith(HYGIENE_SUFFIXES):
            continue
        path = os.path.join(root, rel)
        if not os.path.isfile(path) or os.path.islink(path):
            continue
        patterns = MACHINE_PATTERNS + TEAM_PATTERNS
        if rel.endswith(".md"):
            patterns = patterns + PAGE_ONLY_PATTERNS
        with open(path, encoding="utf-8", errors="replace") as f:
            for n, line in enumerate(f, 1):
                for pat, what in patterns:
                    m = pat.search(line)
                    if m:
                        problems.append("%s:%d: '%s': %s; describe the machine by what it is, "
                                        "the product by what it does" % (rel, n, m.group(0).strip(), what))
    return problems


def main(argv):
    global USE_GIT
    if "--no_git" in argv:
        USE_GIT = False  # as in a source archive: the tree is walked
        argv = [a for a in argv if a != "--no_git"]
    if len(argv) > 2 or (len(argv) == 2 and argv[1].startswith("-")):
        sys.stderr.write("usage: check_doc_links.py [--no_git] [ROOT]\n")
        return 2
    root = os.path.abspath(argv[1] if len(argv) == 2 else os.path.join(os.path.dirname(__file__), ".."))
    readme = os.path.join(root, "README.md")
    docs = os.path.join(root, "docs")
    if not os.path.isfile(readme):
        sys.stderr.write("check_doc_links.py: %s has no README.md\n" % root)
        return 2
    files = [readme]
    if os.path.isdir(docs):
        files += sorted(os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md"))
        start = os.path.join(docs, "start")  # the start pages, one per reader
        if os.path.isdir(start):
            files += sorted(os.path.join(start, f) for f in os.listdir(start) if f.endswith(".md"))
    pages = all_pages(root)
    # Pages generated by a tool (docs/sweep/summary.md) name its run's
    # flags; the flag check reads what people write.
    written = [md for md in pages if os.path.relpath(md, root) != os.path.join("docs", "sweep", "summary.md")]
    problems = []
    for md in pages:
        problems += check_links(root, md)
        problems += check_labels(root, md)
        problems += check_figures(root, md)
    problems += check_layout(root, readme)
    problems += check_docs_linked(root, readme, files[1:])
    problems += check_test_list(root)
    problems += check_test_times(root)
    problems += check_readme_length(readme)
    problems += check_flags(root, written)
    problems += check_metric_names(root)
    problems += check_usage_length(root)
    for md in usage_pages(root):
        problems += check_unquoted_measurements(root, md)
    problems += check_result_pages(root)
    problems += check_hygiene(root)
    for p in problems:
        print(p)
    if problems:
        print("check_doc_links: %d problem(s) in %d file(s) under %s" % (len(problems), len(files), root))
        return 1
    print("check_doc_links: %d pages, every link, label and flag resolves, the layout matches the "
          "tree, every doc is linked from the README, every test target is in docs/TESTING.md, "
          "every quoted figure matches its result page, no unquoted measured figure, no usage page "
          "over %d lines, nothing of "
          "the build machine or of how the product is made" % (len(pages), USAGE_MAX_LINES))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
