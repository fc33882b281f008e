#!/usr/bin/python3
"""Runs a command where Debian's gRPC, Protobuf and Abseil are not findable.

  unshare --mount --propagation private /usr/bin/python3 hide_libs.py KEEP -- CMD...

In the mount namespace unshare made (root only), /usr/lib/x86_64-linux-gnu
is bound to KEEP (an empty directory), a tmpfs replaces it, and it is
filled with symlinks to KEEP's entries except HIDDEN: the loader, its
cache and every library search then find none of those, as on a machine
that never installed them. The command runs with the rest of the system
as it was; nothing outside the namespace changes.
"""

import os
import re
import subprocess
import sys

LIB = "/usr/lib/x86_64-linux-gnu"
HIDDEN = re.compile(r"^lib(protobuf|absl_|grpc|gpr|upb|re2|cares|address_sorting)")


def main():
    if len(sys.argv) < 4 or sys.argv[2] != "--":
        sys.exit("usage: hide_libs.py KEEP -- CMD...")
    keep, cmd = sys.argv[1], sys.argv[3:]
    # Both mounts before the tmpfs hides the libraries mount itself needs.
    subprocess.run(["mount", "--bind", LIB, keep], check=True)
    # A symlink longer than an inode's inline space takes a page: ~3,000 of them.
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "rsslab-hidden", LIB], check=True)
    for name in os.listdir(keep):
        if not HIDDEN.match(name):
            os.symlink(os.path.join(keep, name), os.path.join(LIB, name))
    os.execv(cmd[0], cmd)


if __name__ == "__main__":
    main()
