"""The smallest WSGI application, for the gunicorn master inspect's test
looks at."""


def app(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"ok\n"]
