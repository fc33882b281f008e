#!/usr/bin/python3
"""Packs the rsslab wheel: rsslab/*.py plus the two Bazel-built extensions.

  build_wheel.py --native=.bazel/bin/python/_rsslab.so --out=dist

_rsslab.so is the package's native half; _rsslab_grpc.so (beside it
unless --native_grpc says where) the native Control transport, the only
part that loads gRPC C++.

A wheel is a zip with the package, NAME-VERSION.dist-info/{METADATA,WHEEL,
RECORD} (PEP 427); only the standard library is used, so it builds offline.
The extension is Debian 12's CPython 3.11 ABI (cp311, linux_x86_64): it
links Debian's gRPC, protobuf and Abseil shared libraries, which pip does
not install, so the wheel is for this distribution.
"""

import argparse
import base64
import hashlib
import os
import re
import sys
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.join(os.path.dirname(HERE), "rsslab")
TAG = "cp311-cp311-linux_x86_64"
EXT = "_rsslab.cpython-311-x86_64-linux-gnu.so"
EXT_GRPC = "_rsslab_grpc.cpython-311-x86_64-linux-gnu.so"


def version():
    with open(os.path.join(PKG, "__init__.py")) as f:
        m = re.search(r'^__version__ = "([0-9][0-9A-Za-z.]*)"$', f.read(), re.M)
    if not m:
        sys.exit("build_wheel: no __version__ in rsslab/__init__.py")
    return m.group(1)


def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (name, digest, len(data))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--native", required=True, help="the built _rsslab.so")
    p.add_argument("--native_grpc", default="",
                   help="the built _rsslab_grpc.so (default: beside --native)")
    p.add_argument("--out", default="dist")
    a = p.parse_args()
    a.native_grpc = a.native_grpc or os.path.join(os.path.dirname(a.native), "_rsslab_grpc.so")
    for path in (a.native, a.native_grpc):
        if not os.path.isfile(path):
            print("build_wheel: %s is missing (bazel build //python:_rsslab.so "
                  "//python:_rsslab_grpc.so)" % path, file=sys.stderr)
            sys.exit(2)
    v = version()
    dist_info = "rsslab-%s.dist-info" % v
    files = []
    for name in sorted(os.listdir(PKG)):
        if name.endswith(".py"):
            with open(os.path.join(PKG, name), "rb") as f:
                files.append(("rsslab/" + name, f.read()))
    for path, name in ((a.native, EXT), (a.native_grpc, EXT_GRPC)):
        with open(path, "rb") as f:
            files.append(("rsslab/" + name, f.read()))
    metadata = ("Metadata-Version: 2.1\nName: rsslab\nVersion: %s\n"
                "Summary: Where a Python service's resident memory is, and giving it back "
                "(allocator detection, per-thread release, automatic trim, Control service)\n"
                "Requires-Python: >=3.11,<3.12\n" % v).encode()
    wheel = ("Wheel-Version: 1.0\nGenerator: rsslab build_wheel.py\nRoot-Is-Purelib: false\n"
             "Tag: %s\n" % TAG).encode()
    files.append((dist_info + "/METADATA", metadata))
    files.append((dist_info + "/WHEEL", wheel))
    record = [record_line(n, d) for n, d in files] + [dist_info + "/RECORD,,"]
    files.append((dist_info + "/RECORD", ("\n".join(record) + "\n").encode()))
    os.makedirs(a.out, exist_ok=True)
    path = os.path.join(a.out, "rsslab-%s-%s.whl" % (v, TAG))
    tmp = path + ".tmp"
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files:
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if name.endswith(".so") else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    os.replace(tmp, path)
    print(path)


if __name__ == "__main__":
    main()
