"""Repository rule: Debian's static archives for self-contained extensions.

The Python package's two extensions (//python:_rsslab.so,
//python:_rsslab_grpc.so) must run where Debian's gRPC, Protobuf and Abseil
shared libraries are not installed (docs/PACKAGE.md, "Install"). Of
Debian 12's static archives, gRPC's (grpc++, grpc, gpr, upb,
address_sorting), c-ares, OpenSSL and zlib are position-independent and go
into a shared object. Abseil's, Protobuf's and RE2's are built as PIE, not
PIC: the link stops on their R_X86_64_TPOFF32 (local-exec TLS) relocations
and R_X86_64_PC32 ones against libstdc++'s data, so those three stay
shared libraries, which python/wheel/build_wheel.py copies into the wheel.

This rule runs `pkg-config --static --libs` (which adds the private
dependencies the shared link leaves out: upb, re2, c-ares, address_sorting,
gpr, OpenSSL, zlib) once at fetch time and writes @system_static//:static.bzl
with STATIC_LINKOPTS: each PIC library as `-l:libX.a`, in one
--start-group/--end-group (their order across modules is not a dependency
order). The C runtime (libc, libm, libpthread, libdl, librt) stays shared.
"""

load(":absl_modules.bzl", "ABSL_MODULES")

_MODULES = ["grpc++", "protobuf"] + ABSL_MODULES

# Part of glibc on every Linux: stays a run-time dependency.
_C_RUNTIME = ("c", "m", "dl", "pthread", "rt")

# Archives that are PIE, not PIC (above): left to the shared link.
def _not_pic(name):
    return name.startswith("absl_") or name in ("protobuf", "re2")

def _static_libs_impl(rctx):
    res = rctx.execute(["pkg-config", "--static", "--libs"] + _MODULES)
    if res.return_code != 0:
        fail("pkg-config --static %s failed (run ./rsslab setup): %s" %
             (" ".join(_MODULES), res.stderr))
    archives = []
    for flag in res.stdout.strip().split(" "):
        if not flag.startswith("-l"):
            continue  # -pthread, --push-state/--as-needed pairs: the C runtime's
        name = flag[2:]
        if name in _C_RUNTIME or _not_pic(name):
            continue
        archive = "-l:lib%s.a" % name
        if archive not in archives:
            archives.append(archive)
    opts = ["-Wl,--start-group"] + archives + ["-Wl,--end-group"]
    rctx.file("static.bzl", "STATIC_LINKOPTS = %r\n" % opts)
    rctx.file("BUILD.bazel", 'exports_files(["static.bzl"])\n')
    rctx.file("WORKSPACE", 'workspace(name = "%s")\n' % rctx.name)

static_libs = repository_rule(
    implementation = _static_libs_impl,
    environ = ["PKG_CONFIG_PATH"],
    local = True,
)
