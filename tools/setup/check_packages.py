#!/usr/bin/env python3
"""check_packages: every system file the project uses comes from a package
that ./rsslab setup installs, or that one of those pulls in, or that a
minimal Debian 12 already has.

A machine that happens to carry a package (a developer's, CI's) hides a
missing line in tools/setup/packages.txt until a new user's fresh machine
fails to build. This reads what the project really uses and maps each file
to its package with dpkg's own file lists:
  - headers: every absolute path in the compiler's dependency files (*.d)
    under the Bazel output tree;
  - shared libraries: what ldd resolves for every executable and shared
    object under the Bazel output tree (a "not found" fails too);
  - programs: the commands the shell scripts run (words in command
    position) and the argv[0] literals the Python scripts pass to
    subprocess, found on PATH;
  - absolute paths under /usr, /bin, /sbin, /lib that code and build files
    name (the preloaded allocators, /usr/bin/python3, /usr/sbin/ip, ...);
  - Python modules that .py files import (at top level or in functions),
    resolved by /usr/bin/python3; an import inside `try: ... except
    ImportError` is optional and not required.

Allowed packages: the list, their Depends/Pre-Depends (recursively, the
installed alternative of each), and every Essential or Priority: required
package (what `debootstrap --variant=minbase` installs).

  check_packages.py --root=. --bazel_bin=.bazel/bin            # exit 1 naming file and package
  check_packages.py ... --drop=libgmock-dev                     # as if the line were gone

Exit 0 when everything is covered, 1 when something is not (one line per
file: the file, its package, who used it), 2 on bad arguments.
"""

import argparse
import ast
import os
import re
import shutil
import subprocess
import sys

DPKG_INFO = "/var/lib/dpkg/info"
DPKG_STATUS = "/var/lib/dpkg/status"
SYSTEM_PREFIXES = ("/usr/", "/bin/", "/sbin/", "/lib/", "/lib64/", "/etc/alternatives/")
# Paths the project names that belong to no package on purpose (created at
# run time, or the subject of a test rather than a dependency).
NOT_DEPENDENCIES = re.compile(r"^/usr/(local|src)/|^/usr/lib/os-release$|^/usr/share/zoneinfo")
SHELL_FILES = re.compile(r"(\.sh|^rsslab|^\.ci/run|/before-stop)$")
CODE_FILES = re.compile(r"\.(sh|py|cc|h|bzl|bazel|textproto|service|env)$|(^|/)(BUILD|WORKSPACE|rsslab|run)$")
# Programs run only when present (check_doc_links.py asks git which files
# are tracked and walks the tree without it; tools/fresh_machine.sh installs
# debootstrap on the host it runs on, it is no part of the build or the
# suite), and modules that are not
# dependencies: generated from a .proto at test time, or missing on purpose
# (a handler whose import must fail).
OPTIONAL_PROGRAMS = {"git", "debootstrap"}
NOT_MODULES = re.compile(r"_pb2(_grpc)?$|^this_module_does_not_exist")
SKIP_DIRS = {".git", ".bazel", ".deps", "bin", "results", "dist", "venv", "__pycache__"}


def read_list(path, drop):
    pkgs = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            name = line.split("#", 1)[0].strip()
            if name and name not in drop:
                pkgs.append(name)
    return pkgs


def dpkg_owners():
    """path -> package, from dpkg's file lists (architecture suffix dropped)."""
    owner = {}
    for name in os.listdir(DPKG_INFO):
        if not name.endswith(".list"):
            continue
        pkg = name[:-5].split(":", 1)[0]
        with open(os.path.join(DPKG_INFO, name), encoding="utf-8", errors="replace") as f:
            for line in f:
                owner.setdefault(line.rstrip("\n"), pkg)
    return owner


def parse_status():
    """Installed packages: name -> (depends alternatives, essential/required)."""
    pkgs, provides = {}, {}
    with open(DPKG_STATUS, encoding="utf-8", errors="replace") as f:
        stanzas = f.read().split("\n\n")
    for st in stanzas:
        fields, key = {}, None
        for line in st.split("\n"):
            if line[:1] in (" ", "\t") and key:
                fields[key] += " " + line.strip()
            elif ":" in line:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        name = fields.get("Package")
        if not name or "install ok installed" not in fields.get("Status", ""):
            continue
        deps = []
        for field in ("Pre-Depends", "Depends"):
            for group in filter(None, (g.strip() for g in fields.get(field, "").split(","))):
                deps.append([re.split(r"[\s(:]", alt.strip(), maxsplit=1)[0]
                             for alt in group.split("|")])
        base = fields.get("Essential") == "yes" or fields.get("Priority") == "required"
        pkgs[name] = (deps, base)
        for p in filter(None, (p.strip() for p in fields.get("Provides", "").split(","))):
            provides.setdefault(re.split(r"[\s(]", p, maxsplit=1)[0], []).append(name)
    return pkgs, provides


def allowed_packages(listed, pkgs, provides):
    """The list, what it pulls in, and the minimal base, each with its
    dependencies (the installed alternative of each or-group)."""
    todo = list(listed) + [n for n, (_, base) in pkgs.items() if base]
    seen = set()
    while todo:
        name = todo.pop()
        for real in [name] + provides.get(name, []):
            if real in seen or real not in pkgs:
                continue
            seen.add(real)
            for group in pkgs[real][0]:
                installed = [a for a in group if a in pkgs or a in provides]
                todo.extend(installed[:1])
    return seen


def source_files(root):
    for d, dirs, names in os.walk(root):
        rel_d = os.path.relpath(d, root)
        dirs[:] = [x for x in dirs if x not in SKIP_DIRS and not x.startswith("bazel-")]
        for n in names:
            rel = os.path.normpath(os.path.join(rel_d, n))
            if not os.path.islink(os.path.join(root, rel)):
                yield rel


def headers(bazel_bin):
    used = {}
    for d, _, names in os.walk(bazel_bin, followlinks=True):
        for n in names:
            if n.endswith(".d"):
                with open(os.path.join(d, n), encoding="utf-8", errors="replace") as f:
                    for tok in f.read().replace("\\\n", " ").split():
                        if tok.startswith("/"):
                            used.setdefault(tok, "compiled by the build (" + n + ")")
    return used


def elf_kind(path):
    try:
        with open(path, "rb") as f:
            head = f.read(18)
    except OSError:
        return None
    if len(head) < 18 or head[:4] != b"\x7fELF":
        return None
    return int.from_bytes(head[16:18], "little")  # 2 executable, 3 shared


def shared_libs(bazel_bin, problems):
    used = {}
    seen_real = set()
    for d, _, names in os.walk(bazel_bin, followlinks=True):
        if "/_objs" in d or d.endswith(".runfiles") or ".runfiles/" in d:
            continue
        for n in names:
            path = os.path.join(d, n)
            real = os.path.realpath(path)
            if real in seen_real or elf_kind(real) not in (2, 3):
                continue
            seen_real.add(real)
            out = subprocess.run(["ldd", real], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                 universal_newlines=True).stdout
            for line in out.splitlines():
                m = re.match(r"\s*(\S+) => (not found|(/\S+))", line)
                if not m:
                    continue
                if m.group(2) == "not found":
                    problems.append("%s: needs %s, which no library on this machine provides"
                                    % (os.path.relpath(path, bazel_bin), m.group(1)))
                else:
                    used.setdefault(m.group(3), "linked by " + os.path.relpath(path, bazel_bin))
    return used


# Words that take a command after them in a shell line.
PREFIX_WORDS = {"sudo", "exec", "env", "nice", "nohup", "time", "command", "builtin", "then",
                "do", "else", "elif", "if", "while", "until", "!", "{", "("}
SHELL_SPLIT = re.compile(r"\|\||&&|[|;&`]|\$\(|\(|\)")


HEREDOC = re.compile(r"<<-?\s*['\"]?(\w+)['\"]?")


def shell_commands(text):
    """Words in command position; heredoc bodies (often Python) are skipped,
    and separators inside quotes do not start a command."""
    end = None
    for raw in text.split("\n"):
        if end is not None:
            if raw.strip() == end:
                end = None
            continue
        m = HEREDOC.search(raw)
        if m:
            end = m.group(1)
        line = re.sub(r"(^|\s)#.*$", "", raw)
        line = re.sub(r"'[^']*'", "''", line)
        line = re.sub(r'"[^"]*"', lambda q: re.sub(r"[|;&`()]", " ", q.group(0).replace("$(", "\0"))
                      .replace("\0", "$("), line)
        for part in SHELL_SPLIT.split(line):
            words = part.split()
            while words and (words[0] in PREFIX_WORDS or re.match(r"^\w+=", words[0])
                             or (words[0] in ("timeout", "taskset") and len(words) > 1)):
                if words[0] in ("timeout", "taskset"):
                    words = words[1:]
                    while words and (words[0].startswith("-") or re.match(r"^[\d.,x]+[smh]?$", words[0])):
                        words = words[1:]
                    continue
                words = words[1:]
            if words and re.match(r"^[a-z][\w.+-]*$", words[0]):
                yield words[0]


PY_SUBPROCESS = re.compile(
    r"(?:subprocess\.\w+|Popen|check_output|check_call|shutil\.which)\(\s*\[?\s*[\"']([a-z][\w.+-]*)[\"']")


def programs(root, files):
    used = {}
    for rel in files:
        path = os.path.join(root, rel)
        if SHELL_FILES.search(rel):
            names = shell_commands(open(path, encoding="utf-8", errors="replace").read())
        elif rel.endswith(".py"):
            names = PY_SUBPROCESS.findall(open(path, encoding="utf-8", errors="replace").read())
        else:
            continue
        for name in names:
            found = shutil.which(name)
            if found and found.startswith(SYSTEM_PREFIXES) and name not in OPTIONAL_PROGRAMS:
                used.setdefault(found, "run by " + rel)
    return used


PATH_LITERAL = re.compile(r"(?<![\w.$/-])(/(?:usr|bin|sbin|lib|lib64)/[\w.+/-]+)")


def named_paths(root, files):
    used = {}
    for rel in files:
        if not CODE_FILES.search(rel):
            continue
        text = open(os.path.join(root, rel), encoding="utf-8", errors="replace").read()
        for p in PATH_LITERAL.findall(text):
            p = p.rstrip(".")
            if NOT_DEPENDENCIES.search(p) or not os.path.isfile(p):
                continue
            used.setdefault(p, "named in " + rel)
    return used


def imported_modules(root, files):
    """Top-level module names imported outside `try/except ImportError`."""
    names = {}
    for rel in files:
        if not rel.endswith(".py"):
            continue
        try:
            tree = ast.parse(open(os.path.join(root, rel), encoding="utf-8").read(), rel)
        except (SyntaxError, UnicodeDecodeError):
            continue
        optional = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Try) and any(
                    isinstance(h.type, ast.Name) and h.type.id in ("ImportError", "ModuleNotFoundError")
                    or isinstance(h.type, ast.Tuple) and any(
                        getattr(e, "id", "") in ("ImportError", "ModuleNotFoundError") for e in h.type.elts)
                    for h in node.handlers):
                for inner in node.body:
                    optional.update(id(n) for n in ast.walk(inner))
        for node in ast.walk(tree):
            if id(node) in optional:
                continue
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                mods = [node.module]
            else:
                continue
            for m in mods:
                names.setdefault(m.split(".")[0], rel)
    return names


def module_files(root, modules, problems):
    """Resolves each module with Debian's /usr/bin/python3 (the project's
    own modules, found in the tree, are skipped)."""
    local = set()
    for d, dirs, names in os.walk(root):
        dirs[:] = [x for x in dirs if x not in SKIP_DIRS and not x.startswith("bazel-")]
        local.update(n[:-3] for n in names if n.endswith(".py"))
        local.update(dirs)
    ask = sorted(m for m in modules
                 if m not in local and not m.startswith("_rsslab") and not NOT_MODULES.search(m))
    code = ("import importlib.util, sys\n"
            "for m in sys.argv[1:]:\n"
            "    try:\n"
            "        s = importlib.util.find_spec(m)\n"
            "    except Exception:\n"
            "        s = None\n"
            "    o = s.origin if s is not None else None\n"
            "    print(m, o if o and o.startswith('/') else ('builtin' if s is not None else '-'))\n")
    out = subprocess.run(["/usr/bin/python3", "-c", code] + ask, stdout=subprocess.PIPE,
                         universal_newlines=True, check=True).stdout
    used = {}
    for line in out.splitlines():
        mod, origin = line.split(" ", 1)
        if origin == "-":
            problems.append("python module %s (imported by %s): /usr/bin/python3 cannot import it"
                            % (mod, modules[mod]))
        elif origin != "builtin" and origin.startswith(SYSTEM_PREFIXES):
            used[origin] = "python module %s, imported by %s" % (mod, modules[mod])
    return used


def owner_of(path, owner):
    """The package owning path, trying the usrmerge twin and the resolved
    path (an alternatives link, a library's real file)."""
    def twins(p):
        yield p
        for a, b in (("/usr/lib/", "/lib/"), ("/usr/bin/", "/bin/"), ("/usr/sbin/", "/sbin/"),
                     ("/lib/", "/usr/lib/"), ("/bin/", "/usr/bin/"), ("/sbin/", "/usr/sbin/"),
                     ("/lib64/", "/usr/lib64/")):
            if p.startswith(a):
                yield b + p[len(a):]
    norm = os.path.normpath(path)
    for candidate in (norm, os.path.realpath(norm)):
        for t in twins(candidate):
            if t in owner:
                return owner[t]
    # A directory component may be a link (e.g. /usr/lib/python3.11/config-...).
    real_dir = os.path.join(os.path.realpath(os.path.dirname(norm)), os.path.basename(norm))
    for t in twins(real_dir):
        if t in owner:
            return owner[t]
    return None


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=".", help="the checkout")
    ap.add_argument("--bazel_bin", required=True, help="Bazel's bin directory (bazel info bazel-bin)")
    ap.add_argument("--list", default=None, help="the package list (tools/setup/packages.txt)")
    ap.add_argument("--drop", action="append", default=[], help="check as if PKG were not listed")
    ap.add_argument("--verbose", action="store_true", help="print every file and its package")
    args = ap.parse_args(argv)
    root = os.path.abspath(args.root)
    if not os.path.isdir(args.bazel_bin):
        print("check_packages: --bazel_bin=%s is not a directory (build first)" % args.bazel_bin)
        return 2
    listed = read_list(args.list or os.path.join(root, "tools/setup/packages.txt"), set(args.drop))
    owner = dpkg_owners()
    pkgs, provides = parse_status()
    problems = ["%s: listed in packages.txt but not installed (run ./rsslab setup)" % p
                for p in listed if p not in pkgs and p not in provides]
    allowed = allowed_packages(listed, pkgs, provides)

    files = list(source_files(root))
    used = {}
    for found in (headers(args.bazel_bin), shared_libs(args.bazel_bin, problems),
                  programs(root, files), named_paths(root, files),
                  module_files(root, imported_modules(root, files), problems)):
        for path, why in found.items():
            used.setdefault(path, why)

    missing = {}
    for path in sorted(used):
        if not path.startswith(SYSTEM_PREFIXES) or NOT_DEPENDENCIES.search(path):
            continue
        pkg = owner_of(path, owner)
        if args.verbose:
            print("%s\t%s\t%s" % (pkg or "-", path, used[path]))
        if pkg is None:
            if os.path.exists(path):
                problems.append("%s (%s): no Debian package owns it" % (path, used[path]))
        elif pkg not in allowed:
            missing.setdefault(pkg, []).append(path)
    for pkg, paths in sorted(missing.items()):
        problems.append("%s (%s) comes from package %s, which tools/setup/packages.txt does not "
                        "install%s" % (paths[0], used[paths[0]], pkg,
                                       " (and %d more files of it)" % (len(paths) - 1) if len(paths) > 1 else ""))
    for p in problems:
        print("check_packages: " + p)
    print("check_packages: %d system files used, from %d packages; %d listed, %d allowed with what "
          "they pull in; %s" % (len(used), len({owner_of(p, owner) for p in used} - {None}),
                                len(listed), len(allowed), "%d problems" % len(problems) if problems else "ok"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
