"""doc_commands_test: a page's ```sh blocks run as written (doc_commands_test.py)."""

def doc_commands_test(name, doc, heading = None, size = "medium", tags = []):
    native.sh_test(
        name = name,
        size = size,
        srcs = ["//tests/docs:doc_commands_test.py"],
        args = [doc] + (["'%s'" % heading] if heading else []),
        data = [
            "//:docs",
            "//:rsslab",
            "//agent:profiles.textproto",
            "//agent:rsslab_agent",
            "//agent:rsslab_agent_ctl",
            "//agent:rsslab_run",
            "//ctl:rsslab_ctl",
            "//loadgen:rsslab_loadgen",
            "//python:_rsslab.so",
            "//python:_rsslab_grpc.so",
            "//python:package_py",
            "//python:tests/package_tree.py",
            "//server:handlers",
            "//server:rsslab_server",
            "//tests/anysvc:shop",
            "//tools:serve.sh",
        ],
        tags = tags,
    )
