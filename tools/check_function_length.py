#!/usr/bin/python3
"""Checks that no function body in the project's non-test C++ is 100 lines or
longer, and that no main (main, Main, *Main) is 60 lines or longer.

    tools/check_function_length.py [ROOT]    # ROOT: the checkout, default: this script's ../

Exit 0 when every function fits; otherwise one line per function
(FILE:LINE: NAME is N lines, limit L) and exit 1. Exit 2 for a bad invocation.

Why: long functions were where the house's copies and drift hid; the limit
keeps each function one idea. Files ending in _test.cc are exempt (a test
reads top to bottom). A body is counted from the line after its opening
brace to the line before its closing one. The parser strips comments and
string literals and matches braces; a brace whose header ends in ')' (with
const/override/noexcept/-> after it) and is not if/for/while/switch/catch
opens a function. Lambdas and local classes count toward the function that
holds them.

Before checking the tree, the parser checks itself on a built-in sample with
a known over-long function, so a parser that finds nothing fails the test.
"""

import os
import re
import subprocess
import sys

BODY_LIMIT = 100
MAIN_LIMIT = 60
CONTROL = re.compile(r'\b(if|for|while|switch|catch)\s*\(')
FN_HEAD = re.compile(
    r'([\w:~]+)\s*\([^()]*(?:\([^()]*\)[^()]*)*\)\s*(?:const|override|noexcept|final|mutable|\s)*'
    r'(?:->\s*[\w:<>,\s]+)?$')


def strip(src):
    """Comments and literals out, newlines kept, so line numbers hold."""
    s = re.sub(r'R"(\w*)\((.*?)\)\1"', lambda m: '""' + '\n' * m.group(0).count('\n'), src,
               flags=re.S)
    s = re.sub(r'/\*.*?\*/', lambda m: '\n' * m.group(0).count('\n'), s, flags=re.S)
    s = re.sub(r'//[^\n]*', '', s)
    s = re.sub(r'"(\\.|[^"\\\n])*"', '""', s)
    s = re.sub(r"'(\\.|[^'\\\n])*'", "''", s)
    return s


def functions(src):
    """(name, first line, body lines) of every outermost function body."""
    s = strip(src)
    stack, out, line = [], [], 1
    last = -1  # index of the last ; { or }
    for i, ch in enumerate(s):
        if ch == '\n':
            line += 1
        elif ch == '{':
            head = s[last + 1:i].strip()
            m = FN_HEAD.search(head)
            is_fn = bool(m) and not CONTROL.search(head) and m.group(1) not in (
                'if', 'for', 'while', 'switch', 'catch')
            stack.append((line, is_fn, m.group(1) if m else ''))
            last = i
        elif ch == '}':
            if stack:
                first, is_fn, name = stack.pop()
                if is_fn and not any(x[1] for x in stack):
                    out.append((name, first, line - first - 1))
            last = i
        elif ch == ';':
            last = i
    return out


def is_main(name):
    return name == 'main' or name.endswith('Main')


def problems(path, src):
    for name, first, body in functions(src):
        limit = MAIN_LIMIT if is_main(name) else BODY_LIMIT
        if body >= limit:
            yield f'{path}:{first}: {name} is {body} lines, limit {limit - 1}'


SAMPLE = ('namespace {\nint Short(int a) {\n  if (a) {\n    return 1;\n  }\n  return 0;\n}\n'
          'void Long(const std::string& s,\n          int n) const {\n' +
          '  x();  // "{"\n' * 100 + '}\n}  // namespace\n'
          'int main(int argc, char** argv) {\n' + '  y();\n' * 60 + '}\n')


def self_check():
    found = sorted(p.split(': ')[1].split(' ')[0] for p in problems('sample.cc', SAMPLE))
    if found != ['Long', 'main']:
        print(f'check_function_length: the parser is broken: found {found} in its sample, '
              'expected Long and main', file=sys.stderr)
        sys.exit(1)


def main(argv):
    if len(argv) > 2:
        print('usage: check_function_length.py [ROOT]', file=sys.stderr)
        return 2
    root = argv[1] if len(argv) == 2 else os.path.join(os.path.dirname(__file__), '..')
    self_check()
    try:
        files = subprocess.run(['git', '-C', root, 'ls-files', '*.cc', '*.h'], check=True,
                               capture_output=True, text=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        files = [os.path.relpath(os.path.join(d, f), root)
                 for d, _, fs in os.walk(root) if '/bazel-' not in d and '/.' not in d
                 for f in fs if f.endswith(('.cc', '.h'))]
    bad = []
    for f in sorted(files):
        if f.endswith('_test.cc') or f.startswith('bazel-'):
            continue
        with open(os.path.join(root, f), errors='replace') as fh:
            bad.extend(problems(f, fh.read()))
    for b in bad:
        print(b)
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
