"""Does nothing: for measuring the transport and the load generator."""
def handle(request, cache):
    return None
