"""What the client scripts of tests/serve share (each runs with this folder
first on its path): a check that prints what held, or raises."""


def check(cond, what):
    """Raises AssertionError(what) unless ``cond``; prints ``ok: what``."""
    if not cond:
        raise AssertionError(what)
    print(f"ok: {what}")
