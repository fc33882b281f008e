#!/usr/bin/python3
"""Checks the house's layering rules that a reader of docs/ARCHITECTURE.md relies on.

    tools/check_layering.py [ROOT]    # ROOT: the checkout, default: this script's ../

Rules:
  - common/ includes nothing of memory/, server/, python/, control/, ctl/, registry/,
    agent/, loadgen/ or exporter/ (common/ is the floor every program stands on);
  - memory/ includes nothing of server/, python/ or the programs' folders;
  - server/ and python/native/ include nothing of each other (the Control
    operations they share live once, in control/ops/);
  - loadgen/ holds at most 14 top-level non-test .cc files (new jobs go into
    its subfolders: run/, sweep/, results/, gate/, http/).

Exit 0 when every rule holds; otherwise one line per breach (FILE:LINE: why)
and exit 1; 2 for a bad invocation. Before checking the tree, the checker
runs itself on a built-in sample that breaks each rule, so a checker that
finds nothing fails.
"""

import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
PROGRAMS = ('server/', 'python/', 'control/', 'ctl/', 'registry/', 'agent/', 'loadgen/',
            'exporter/')
# folder -> include prefixes it must not use
FORBIDDEN = {
    'common/': ('memory/',) + PROGRAMS,
    'memory/': PROGRAMS,
    'server/': ('python/',),
    'python/native/': ('server/',),
}
LOADGEN_TOP_LIMIT = 14


def breaches(files):
    """files: {relative path: text}. Returns the breach lines, sorted."""
    out = []
    for path, text in files.items():
        if not path.endswith(('.h', '.cc')):
            continue
        for folder, banned in FORBIDDEN.items():
            if not path.startswith(folder):
                continue
            for n, line in enumerate(text.splitlines(), 1):
                m = INCLUDE.match(line)
                if m and m.group(1).startswith(banned):
                    out.append(f'{path}:{n}: {folder} includes {m.group(1)}, a higher layer')
    top = sorted(p for p in files if re.fullmatch(r'loadgen/[^/]+\.cc', p)
                 and not p.endswith('_test.cc'))
    if len(top) > LOADGEN_TOP_LIMIT:
        out.append(f'loadgen/: {len(top)} top-level non-test .cc files, limit {LOADGEN_TOP_LIMIT} '
                   f'(move a job into a subfolder): {", ".join(os.path.basename(p) for p in top)}')
    return sorted(out)


def self_check():
    sample = {
        'common/a.cc': '#include "memory/trim/x.h"\n',
        'memory/b.h': '#include "server/core.h"\n',
        'server/c.cc': '#include "python/native/d.h"\n',
        'python/native/e.cc': '#include "server/core.h"\n',
        'common/ok.cc': '#include "common/units.h"\n',
    }
    sample.update({f'loadgen/f{i}.cc': '' for i in range(LOADGEN_TOP_LIMIT + 1)})
    found = breaches(sample)
    if len(found) != 5:
        sys.exit(f'check_layering: self-check found {len(found)} of 5 planted breaches: {found}')


def main(argv):
    if len(argv) > 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    root = argv[1] if len(argv) == 2 else os.path.join(os.path.dirname(__file__), '..')
    if not os.path.isfile(os.path.join(root, 'README.md')):
        print(f'check_layering: {root} is not the checkout (no README.md)', file=sys.stderr)
        return 2
    self_check()
    files = {}
    for folder in ('common', 'memory', 'server', 'python', 'loadgen'):
        for d, dirs, names in os.walk(os.path.join(root, folder)):
            dirs[:] = [x for x in dirs if not x.startswith(('.', 'bazel-'))]
            for name in names:
                if name.endswith(('.h', '.cc')):
                    full = os.path.join(d, name)
                    with open(full, encoding='utf-8', errors='replace') as f:
                        files[os.path.relpath(full, root)] = f.read()
    found = breaches(files)
    for line in found:
        print(line)
    if found:
        return 1
    print(f'check_layering: {len(files)} files, every include goes down or sideways; '
          f'loadgen/ within {LOADGEN_TOP_LIMIT} top-level .cc files')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
