#!/usr/bin/python3
"""Packs the rsslab wheel: rsslab/*.py, the two Bazel-built extensions and
the shared libraries they still need.

  build_wheel.py --native=.bazel/bin/python/_rsslab.so --out=dist [--abi=cp311]

_rsslab.so is the package's native half; _rsslab_grpc.so (beside it
unless --native_grpc says where) the native Control transport, the only
part that loads gRPC C++.

A wheel is a zip with the package, NAME-VERSION.dist-info/{METADATA,WHEEL,
RECORD} (PEP 427); only the standard library and ldd are used, so it
builds offline. --abi names the CPython the extensions were built for
(cp311 for Debian 12's; its headers are what //python:_rsslab.so compiled
against): it sets the extensions' file names, the wheel's tag and
Requires-Python. The extensions link gRPC, OpenSSL and zlib statically
(python/BUILD.bazel); Abseil, Protobuf and RE2, which Debian ships only as
shared PIC code, are copied from where ldd finds them into rsslab.libs/,
which the extensions' RPATH names, so the wheel needs nothing from the
target machine but the C/C++ runtime. Each copy gets a soname of its own
(libprotobuf.so.32 -> libprotobuf-<8 hex of its sha256>.so.32, with
patchelf, as auditwheel does), and every NEEDED entry naming it follows: a
process that loaded another build's libprotobuf.so.32 first (the loader
matches a NEEDED entry to a loaded library by soname) still gets the
wheel's own. --platform is the manylinux tag that
runtime's symbol versions call for; python/wheel/check_wheel.py derives it
from the built files and fails when they disagree.
"""

import argparse
import base64
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.join(os.path.dirname(HERE), "rsslab")
# GLIBC_2.34 and libstdc++'s GLIBCXX_3.4.30 (gcc 12, as Ubuntu 22.04's
# glibc 2.35 ships): check_wheel.py's table.
PLATFORM = "manylinux_2_35_x86_64"
LIBS_DIR = "rsslab.libs"
# The C/C++ runtime every Linux with a CPython has: never copied in.
C_RUNTIME = re.compile(r"^(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt|"
                       r"ld-linux-x86-64)\.so\.[0-9]+$|^linux-vdso\.so\.1$")
# A sanitizer build's runtimes (package_test under --config=asan) stay the
# compiler's, under their own sonames: the process preloads that one, and a
# renamed copy would be a second runtime that aborts at load ("Shadow memory
# range interleaves"). No release wheel has them (check_wheel.py refuses).
SANITIZER_RUNTIME = re.compile(r"^lib(asan|ubsan|lsan|tsan)\.so\.[0-9]+$")


def version():
    with open(os.path.join(PKG, "__init__.py")) as f:
        m = re.search(r'^__version__ = "([0-9][0-9A-Za-z.]*)"$', f.read(), re.M)
    if not m:
        sys.exit("build_wheel: no __version__ in rsslab/__init__.py")
    return m.group(1)


def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (name, digest, len(data))


def python_version(abi):
    """(3, 11) for cp311; exits naming the option when it is not cpXY."""
    m = re.fullmatch(r"cp3([0-9]{1,2})", abi)
    if not m:
        print("build_wheel: --abi must be cp3XX (cp311, cp313, ...), got %r" % abi,
              file=sys.stderr)
        sys.exit(2)
    return 3, int(m.group(1))


def shared_deps(paths):
    """{soname: path} of the libraries the extensions load outside the C runtime."""
    deps = {}
    for path in paths:
        r = subprocess.run(["ldd", path], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("build_wheel: ldd %s: %s" % (path, r.stderr.strip()))
        for line in r.stdout.splitlines():
            name, _, where = line.strip().partition(" => ")
            if not where or C_RUNTIME.match(name) or SANITIZER_RUNTIME.match(name):
                continue
            if where.startswith("not found"):
                sys.exit("build_wheel: %s needs %s, which ldd does not find" % (path, name))
            deps[name] = where.split(" (", 1)[0]
    return deps


def own_soname(soname, data):
    """libprotobuf.so.32 -> libprotobuf-1a2b3c4d.so.32 (8 hex of the file's sha256)."""
    stem, dot, rest = soname.partition(".so")
    return "%s-%s%s%s" % (stem, hashlib.sha256(data).hexdigest()[:8], dot, rest)


def patchelf(args):
    r = subprocess.run(["patchelf"] + args, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("build_wheel: patchelf %s: %s" % (" ".join(args), r.stderr.strip()
                                                    or "exit %d" % r.returncode))


def renamed_natives(paths, deps, work):
    """Copies of the extensions and their libraries in WORK, each library
    under its own soname and every NEEDED entry renamed to match.

    Returns ([extension copies], [(wheel name of a library, its copy)]).
    """
    if not shutil.which("patchelf"):
        sys.exit("build_wheel: patchelf is missing (./rsslab setup installs it; "
                 "apt-get install patchelf)")
    names = {}
    for soname, path in deps.items():
        with open(path, "rb") as f:
            names[soname] = own_soname(soname, f.read())
    exts, libs = [], []
    for i, path in enumerate(paths):
        exts.append(os.path.join(work, "ext%d.so" % i))
        shutil.copyfile(path, exts[-1])
    for soname, path in sorted(deps.items()):
        libs.append((names[soname], os.path.join(work, names[soname])))
        shutil.copyfile(path, libs[-1][1])
        patchelf(["--set-soname", names[soname], libs[-1][1]])
    replace = [arg for old, new in sorted(names.items()) for arg in ("--replace-needed", old, new)]
    for copy in exts + [c for _, c in libs]:
        patchelf(replace + [copy])  # names it does not need are left alone
    return exts, libs


def wheel_files(a, py, v):
    """[(name in the wheel, bytes)] of the package, extensions and libraries."""
    suffix = ".cpython-%d%d-x86_64-linux-gnu.so" % py
    files = []
    for name in sorted(os.listdir(PKG)):
        if name.endswith(".py"):
            with open(os.path.join(PKG, name), "rb") as f:
                files.append(("rsslab/" + name, f.read()))
    natives = [a.native, a.native_grpc]
    with tempfile.TemporaryDirectory() as work:
        exts, libs = renamed_natives(natives, shared_deps(natives), work)
        for path, name in zip(exts, ("_rsslab", "_rsslab_grpc")):
            with open(path, "rb") as f:
                files.append(("rsslab/" + name + suffix, f.read()))
        for name, path in libs:
            with open(path, "rb") as f:
                files.append(("%s/%s" % (LIBS_DIR, name), f.read()))
    metadata = ("Metadata-Version: 2.1\nName: rsslab\nVersion: %s\n"
                "Summary: Where a Python service's resident memory is, and giving it back "
                "(allocator detection, per-thread release, automatic trim, Control service)\n"
                "Requires-Python: >=%d.%d,<%d.%d\n" % (v, py[0], py[1], py[0], py[1] + 1)).encode()
    tag = "%s-%s-%s" % (a.python_tag or a.abi, a.abi, a.platform)
    wheel = ("Wheel-Version: 1.0\nGenerator: rsslab build_wheel.py\nRoot-Is-Purelib: false\n"
             "Tag: %s\n" % tag).encode()
    dist_info = "rsslab-%s.dist-info" % v
    files.append((dist_info + "/METADATA", metadata))
    files.append((dist_info + "/WHEEL", wheel))
    record = [record_line(n, d) for n, d in files] + [dist_info + "/RECORD,,"]
    files.append((dist_info + "/RECORD", ("\n".join(record) + "\n").encode()))
    return tag, files


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--native", required=True, help="the built _rsslab.so")
    p.add_argument("--native_grpc", default="",
                   help="the built _rsslab_grpc.so (default: beside --native)")
    p.add_argument("--abi", default="cp311",
                   help="the CPython ABI the extensions were built for: cp311, cp313, ...")
    p.add_argument("--python_tag", default="", help="the wheel's Python tag (default: --abi)")
    p.add_argument("--platform", default=PLATFORM, help="the wheel's platform tag")
    p.add_argument("--out", default="dist")
    a = p.parse_args()
    py = python_version(a.abi)
    if not re.fullmatch(r"manylinux_2_[0-9]{1,3}_x86_64", a.platform):
        print("build_wheel: --platform must be manylinux_2_XX_x86_64, got %r" % a.platform,
              file=sys.stderr)
        sys.exit(2)
    a.native_grpc = a.native_grpc or os.path.join(os.path.dirname(a.native), "_rsslab_grpc.so")
    for path in (a.native, a.native_grpc):
        if not os.path.isfile(path):
            print("build_wheel: %s is missing (bazel build //python:_rsslab.so "
                  "//python:_rsslab_grpc.so)" % path, file=sys.stderr)
            sys.exit(2)
    v = version()
    tag, files = wheel_files(a, py, v)
    os.makedirs(a.out, exist_ok=True)
    path = os.path.join(a.out, "rsslab-%s-%s.whl" % (v, tag))
    tmp = path + ".tmp"
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files:
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if ".so" in name else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    os.replace(tmp, path)
    print(path)


if __name__ == "__main__":
    main()
