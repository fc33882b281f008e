"""rsslab.serve(): the Control service inside this process (native)."""


def serve(control, metrics, token_file):
    raise NotImplementedError("rsslab.serve() is not built yet")


def stop():
    pass
