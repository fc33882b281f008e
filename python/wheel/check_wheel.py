#!/usr/bin/python3
"""Checks that built wheels install where they claim to.

  check_wheel.py dist/rsslab-*.whl

For each wheel, from its own files (unpacked, never installed):
- NEEDED: every ELF file's (readelf -d) entries name only the C/C++ runtime
  (libc, libm, libstdc++, libgcc_s, libpthread, libdl, librt, the loader)
  or a library the wheel itself carries in rsslab.libs/; an extension that
  needs one of those names rsslab.libs in its RPATH.
- Own sonames: each library in rsslab.libs/ is named NAME-<8 hex>.so.N
  and its SONAME is its file name, so the loader never takes another
  build's library of the distribution's name in its place.
- The platform tag: the highest GLIBC_, GLIBCXX_ and CXXABI_ symbol
  versions (objdump -T) give the oldest glibc the wheel can run on (for
  libstdc++'s, the glibc of the oldest distribution that ships it: TABLE),
  and the wheel's tag must be manylinux_2_<that minor>_x86_64.
- The Python tag: cpXY in the tag, extensions named .cpython-XY-..., and a
  Requires-Python that admits X.Y and neither X.(Y-1) nor X.(Y+1).

Prints one line per wheel (size, tag, NEEDED outside the C runtime) and
one per problem; exits 1 when there is any.
"""

import os
import re
import subprocess
import sys
import tempfile
import zipfile

C_RUNTIME = re.compile(r"^(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt|"
                       r"ld-linux-x86-64)\.so\.[0-9]+$")
LIBS_DIR = "rsslab.libs"
OWN_NAME = re.compile(r"^[A-Za-z0-9_+.]+-[0-9a-f]{8}\.so(\.[0-9]+)*$")
# libstdc++'s newest symbol versions -> the oldest glibc whose reference
# distribution ships a libstdc++ that has them (manylinux: the platform
# promises its own system's libstdc++): CentOS 7 (2.17, gcc 4.8), Debian 10
# (2.28, gcc 8), Ubuntu 20.04 (2.31, gcc 10), RHEL 9 (2.34, gcc 11),
# Ubuntu 22.04 (2.35, gcc 12), Ubuntu 24.04 (2.39, gcc 14).
TABLE = [  # (glibc minor, GLIBCXX_3.4.N max, CXXABI_1.3.N max)
    (17, 19, 7), (28, 25, 11), (31, 28, 12), (34, 29, 13), (35, 30, 13), (39, 33, 15),
]


def versions(text, prefix):
    """The version tuples after PREFIX_ in objdump -T output."""
    return [tuple(int(x) for x in m.split("."))
            for m in re.findall(r"\b%s_([0-9]+(?:\.[0-9]+)*)\b" % prefix, text)]


def glibc_needed(objdump_text):
    """(glibc minor the symbols call for, {prefix: highest version})."""
    top = {}
    for prefix in ("GLIBC", "GLIBCXX", "CXXABI"):
        found = versions(objdump_text, prefix)
        top[prefix] = max(found) if found else None
    minor = top["GLIBC"][1] if top["GLIBC"] else 17
    cxx = top["GLIBCXX"][2] if top["GLIBCXX"] and len(top["GLIBCXX"]) > 2 else 0
    abi = top["CXXABI"][2] if top["CXXABI"] and len(top["CXXABI"]) > 2 else 0
    fits = [g for g, c, x in TABLE if c >= cxx and x >= abi]
    if not fits:
        return None, top
    return max(minor, fits[0]), top


def highest(top):
    """GLIBC_2.34 GLIBCXX_3.4.30 ... from glibc_needed()'s second part."""
    return " ".join("%s_%s" % (k, ".".join(map(str, v))) for k, v in top.items() if v)


def admits(spec, version):
    """Whether a Requires-Python of >=, >, <=, <, ==, != clauses admits (X, Y)."""
    ops = {">=": lambda a, b: a >= b, ">": lambda a, b: a > b, "<=": lambda a, b: a <= b,
           "<": lambda a, b: a < b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b}
    for clause in spec.split(","):
        m = re.fullmatch(r"\s*(>=|<=|==|!=|<|>)\s*([0-9]+)\.([0-9]+)\s*", clause)
        if not m:
            raise ValueError("Requires-Python clause %r is not OP X.Y" % clause)
        if not ops[m.group(1)](version, (int(m.group(2)), int(m.group(3)))):
            return False
    return True


def elf_files(root):
    for d, _, names in os.walk(root):
        for n in sorted(names):
            path = os.path.join(d, n)
            with open(path, "rb") as f:
                if f.read(4) == b"\x7fELF":
                    yield path


def tool(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit("check_wheel: %s: %s" % (" ".join(cmd), r.stderr.strip()))
    return r.stdout


def check_elves(root, problems):
    """NEEDED and RPATH of every ELF file; returns (objdump -T text, outside)."""
    carried = set(os.listdir(os.path.join(root, LIBS_DIR))) \
        if os.path.isdir(os.path.join(root, LIBS_DIR)) else set()
    symbols, outside = [], set()
    for path in elf_files(root):
        rel = os.path.relpath(path, root)
        dyn = tool(["readelf", "-d", path])
        needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dyn)
        rpath = re.findall(r"\((?:RPATH|RUNPATH)\)\s+Library r(?:un)?path: \[([^\]]+)\]", dyn)
        others = [n for n in needed if not C_RUNTIME.match(n)]
        outside.update(others)
        missing = [n for n in others if n not in carried]
        if missing:
            problems.append("%s needs %d libraries neither the C/C++ runtime nor in %s/: %s"
                            % (rel, len(missing), LIBS_DIR, " ".join(missing)))
        if others and not rel.startswith(LIBS_DIR + "/") and \
                "$ORIGIN/../%s" % LIBS_DIR not in ":".join(rpath).split(":"):
            problems.append("%s needs %s but its RPATH %r does not name $ORIGIN/../%s"
                            % (rel, others[0], rpath, LIBS_DIR))
        if rel.startswith(LIBS_DIR + "/"):
            soname = re.findall(r"\(SONAME\)\s+Library soname: \[([^\]]+)\]", dyn)
            name = os.path.basename(rel)
            if soname != [name] or not OWN_NAME.match(name):
                problems.append("%s (SONAME %s) is not under a soname of the wheel's own "
                                "(NAME-<8 hex>.so.N): a process that loaded another build's %s "
                                "first would hand the extensions that one"
                                % (rel, soname, soname[0] if soname else name))
        symbols.append(tool(["objdump", "-T", path]))
    return "\n".join(symbols), sorted(outside)


def check_tags(root, wheel, objdump_text, problems):
    """The platform and Python tags against the files; returns the tag."""
    info = [d for d in os.listdir(root) if d.endswith(".dist-info")]
    if len(info) != 1:
        problems.append("%d .dist-info directories" % len(info))
        return ""
    meta = open(os.path.join(root, info[0], "METADATA")).read()
    tags = re.findall(r"^Tag: (\S+)$", open(os.path.join(root, info[0], "WHEEL")).read(), re.M)
    if len(tags) != 1 or not wheel.endswith("-%s.whl" % tags[0]):
        problems.append("WHEEL's Tag %r and the file name %s disagree" % (tags, wheel))
        return ""
    py_tag, abi, platform = tags[0].split("-")
    minor, top = glibc_needed(objdump_text)
    want = "manylinux_2_%d_x86_64" % minor if minor else None
    if platform != want:
        problems.append("platform tag %s, but the symbols (%s) call for %s"
                        % (platform, highest(top), want))
    m = re.fullmatch(r"cp3([0-9]+)", abi)
    if not m or py_tag != abi:
        problems.append("Python tag %s-%s is not one CPython's cp3XX-cp3XX" % (py_tag, abi))
        return tags[0]
    y = int(m.group(1))
    exts = [n for n in os.listdir(os.path.join(root, "rsslab")) if n.endswith(".so")]
    bad = [n for n in exts if not n.endswith(".cpython-3%d-x86_64-linux-gnu.so" % y)]
    if not exts or bad:
        problems.append("extensions %s do not all end in .cpython-3%d-x86_64-linux-gnu.so"
                        % (exts, y))
    req = re.findall(r"^Requires-Python: (.+)$", meta, re.M)
    try:
        right = req and admits(req[0], (3, y)) and not admits(req[0], (3, y - 1)) \
            and not admits(req[0], (3, y + 1))
    except ValueError as e:
        problems.append(str(e))
        return tags[0]
    if not right:
        problems.append("Requires-Python %r does not admit exactly 3.%d, the ABI of %s"
                        % (req, y, abi))
    return tags[0]


def check(wheel):
    """The problems of one wheel (empty when it is right) and its summary line."""
    problems = []
    with tempfile.TemporaryDirectory() as root:
        with zipfile.ZipFile(wheel) as z:
            z.extractall(root)
        objdump_text, outside = check_elves(root, problems)
        tag = check_tags(root, os.path.basename(wheel), objdump_text, problems)
    top = glibc_needed(objdump_text)[1]
    absl = [n for n in outside if n.startswith("libabsl_")]
    named = [n for n in outside if n not in absl] + (
        ["%d libabsl_*%s" % (len(absl), absl[0][absl[0].index(".so"):])] if absl else [])
    summary = "%s: %d bytes, tag %s (%s), NEEDED outside the C/C++ runtime: %s" % (
        os.path.basename(wheel), os.path.getsize(wheel), tag,
        highest(top),
        ", ".join(named) or "none")
    return problems, summary


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: check_wheel.py WHEEL...")
    failed = False
    for wheel in sys.argv[1:]:
        problems, summary = check(wheel)
        print(summary)
        for p in problems:
            print("  FAIL " + p)
        failed = failed or bool(problems)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
