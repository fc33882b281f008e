"""Repository rule exposing Debian's packaged C/C++ libraries to Bazel.

Runs pkg-config once at fetch time and writes cc_library targets with the
flags it reports. The embedded CPython is chosen here, and only here: set
RSSLAB_PYTHON_PC to another pkg-config module (for example
`python-3.13t-embed`) or RSSLAB_PYTHON_PC_PATH to a directory holding its
.pc file, then `bazel build --repo_env=RSSLAB_PYTHON_PC=...`.

How CPython is linked: RSSLAB_PYTHON_LINK=static (the default when the
module is the default one and its static archive libpythonX.Y.a is
installed, as Debian's libpython3.11-dev does) or shared. Static is what
Debian's own /usr/bin/python3 does: the interpreter then calls itself
directly, without the PLT and GOT indirection of the position-independent
libpython3.11.so (docs/BENCHMARKS.md, "Seed overhead"). The archive holds non-PIC code, so binaries that link it are
not position-independent (-no-pie), and they export their symbols
(--export-dynamic) so the extension modules in lib-dynload (_json, ...)
can resolve the C API against the executable: without it they fail to
import and json quietly falls back to pure Python. Snapshots list the
accelerators that loaded (python.accelerators), and
//tests:handlers_test (JsonAcceleratorLoaded) fails when _json is not
among them.
"""

load(":absl_modules.bzl", "ABSL_MODULES")

_DEFAULT_PYTHON_PC = "python3-embed"

def _pkg_config(rctx, modules):
    env = {}
    extra = rctx.os.environ.get("RSSLAB_PYTHON_PC_PATH", "")
    if extra:
        env["PKG_CONFIG_PATH"] = extra
    res = rctx.execute(["pkg-config", "--cflags", "--libs"] + modules, environment = env)
    if res.return_code != 0:
        fail("pkg-config %s failed (run ./rsslab setup to install the -dev packages): %s" %
             (" ".join(modules), res.stderr))
    return [f for f in res.stdout.strip().split(" ") if f]

def _split(flags):
    includes = []
    copts = []
    linkopts = []
    for f in flags:
        if f.startswith("-I"):
            includes.append(f[2:])
        elif f.startswith("-l") or f.startswith("-L") or f.startswith("-Wl"):
            linkopts.append(f)
        else:
            copts.append(f)
    return includes, copts, linkopts

def _lib(rctx, name, modules, extra_linkopts = [], drop_linkopts = []):
    includes, copts, linkopts = _split(_pkg_config(rctx, modules))
    linkopts = [o for o in linkopts if not [d for d in drop_linkopts if o.startswith(d)]]

    # System include dirs must live inside the repository for `includes`;
    # /usr/include itself is already on the compiler's path.
    local_includes = []
    for i, inc in enumerate(includes):
        if inc in ("/usr/include", "/usr/include/x86_64-linux-gnu"):
            continue
        link = "%s_inc%d" % (name, i)
        rctx.symlink(inc, link)
        local_includes.append(link)
    hdrs = ", ".join(['glob(["%s/**"])' % d for d in local_includes]) or "[]"
    if len(local_includes) > 1:
        hdrs = " + ".join(['glob(["%s/**"])' % d for d in local_includes])
    return """
cc_library(
    name = "{name}",
    hdrs = {hdrs},
    includes = {includes},
    defines = {defines},
    linkopts = {linkopts},
)
""".format(
        name = name,
        hdrs = hdrs,
        includes = repr(local_includes),
        defines = repr([c[2:] for c in copts if c.startswith("-D")]),
        linkopts = repr(linkopts + extra_linkopts),
    )

def _pkg_var(rctx, module, args):
    env = {}
    extra = rctx.os.environ.get("RSSLAB_PYTHON_PC_PATH", "")
    if extra:
        env["PKG_CONFIG_PATH"] = extra
    res = rctx.execute(["pkg-config"] + args + [module], environment = env)
    return res.stdout.strip() if res.return_code == 0 else ""

# "static" or "shared", and the linkopts that replace pkg-config's -lpythonX.Y
# for a static link.
def _python_link(rctx, py_pc):
    mode = rctx.os.environ.get("RSSLAB_PYTHON_LINK", "")
    if mode not in ("", "static", "shared"):
        fail("RSSLAB_PYTHON_LINK must be static or shared, got '%s'" % mode)
    if mode == "shared":
        return "shared", []
    version = _pkg_var(rctx, py_pc, ["--modversion"])
    libdir = _pkg_var(rctx, py_pc, ["--variable=libdir"])
    archive = "%s/libpython%s.a" % (libdir, version)
    if not version or not libdir or not rctx.path(archive).exists:
        if mode == "static":
            fail("RSSLAB_PYTHON_LINK=static: %s is missing (install libpython%s-dev)" % (archive, version))
        return "shared", []
    if mode == "" and py_pc != _DEFAULT_PYTHON_PC:
        return "shared", []
    return "static", [
        # Every object, so the C API the extension modules call is there
        # even when the server itself does not use it.
        "-Wl,--whole-archive,-l:libpython%s.a,--no-whole-archive" % version,
        # The built-in modules' own dependencies (pyexpat, zlib, binascii).
        "-lexpat",
        "-lz",
        "-lutil",
        "-no-pie",
        "-Wl,--export-dynamic",
    ]

def _system_libs_impl(rctx):
    py_pc = rctx.os.environ.get("RSSLAB_PYTHON_PC", _DEFAULT_PYTHON_PC)
    build = ['package(default_visibility = ["//visibility:public"])\n']
    build.append(_lib(rctx, "grpc", ["grpc++", "protobuf"], ["-lpthread"]))
    # Protobuf alone: the messages, for code that must not load gRPC (the
    # Python package's extension).
    build.append(_lib(rctx, "protobuf", ["protobuf"], ["-lpthread"]))
    py_link, py_static_opts = _python_link(rctx, py_pc)
    if py_link == "static":
        build.append(_lib(rctx, "python", [py_pc], py_static_opts + ["-ldl", "-lm", "-lpthread"],
                          drop_linkopts = ["-lpython"]))
    else:
        build.append(_lib(rctx, "python", [py_pc], ["-ldl", "-lm"]))
    # Headers only, for extension modules (python/): the interpreter that
    # imports them provides the C API, so they must not link libpython.
    build.append(_lib(rctx, "python_headers", ["python3"], drop_linkopts = ["-l", "-L"]))
    build.append(_lib(rctx, "absl", ABSL_MODULES))
    # nghttp2's session API (libnghttp2-dev): the loadgen's h2c client.
    build.append(_lib(rctx, "nghttp2", ["libnghttp2"]))
    # Boost.Beast and Asio (libboost-dev), header-only: the loadgen's
    # HTTP/1.1 client. No pkg-config file; the headers are in /usr/include.
    build.append("""
cc_library(
    name = "boost_beast",
    defines = ["BOOST_ASIO_NO_DEPRECATED"],
    linkopts = ["-lpthread"],
)
""")
    build.append("""
cc_library(
    name = "gtest",
    linkopts = ["-lgtest", "-lpthread"],
)

cc_library(
    name = "gtest_main",
    linkopts = ["-lgtest_main", "-lgtest", "-lpthread"],
)

cc_library(
    name = "gmock",
    linkopts = ["-lgmock", "-lgtest", "-lpthread"],
)

cc_library(
    name = "dl",
    linkopts = ["-ldl"],
)

# libprotoc (libprotoc-dev): the .proto parser (compiler::Importer) the
# loadgen uses to call any method from a user's .proto without codegen.
cc_library(
    name = "protoc",
    linkopts = ["-lprotoc"],
    deps = [":grpc"],
)

# Google Benchmark (libbenchmark-dev): bench/ microbenchmarks only.
cc_library(
    name = "benchmark",
    linkopts = ["-lbenchmark", "-lpthread"],
)

# RE2 (libre2-dev, which libgrpc++-dev depends on): an operator's ready-line
# regex for a launched program (agent/readiness.h), linear in the line.
cc_library(
    name = "re2",
    linkopts = ["-lre2"],
    deps = [":absl"],
)
""")
    rctx.file("BUILD.bazel", "\n".join(build))
    rctx.file("WORKSPACE", 'workspace(name = "%s")\n' % rctx.name)
    rctx.file("python_pc.txt", py_pc + "\n")
    rctx.file("python_link.txt", py_link + "\n")

system_libs = repository_rule(
    implementation = _system_libs_impl,
    environ = ["RSSLAB_PYTHON_PC", "RSSLAB_PYTHON_PC_PATH", "RSSLAB_PYTHON_LINK", "PKG_CONFIG_PATH"],
    local = True,
)
