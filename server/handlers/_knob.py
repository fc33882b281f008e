"""Handler knobs: one reading of request params for every built-in handler.

A handler declares DEFAULTS (name -> default value); a request's string
params override them, converted to the default's type. Imported by the
handlers beside it (the server puts a handler's directory on sys.path).

    from _knob import knob
    DEFAULTS = {"median": 4096.0, "dict_items": 200}
    items = knob(params, "dict_items", DEFAULTS)   # int, 200 unless params say
"""


def knob(params, name, defaults):
    default = defaults[name]
    value = params.get(name)
    if value is None:
        return default
    return type(default)(value)
