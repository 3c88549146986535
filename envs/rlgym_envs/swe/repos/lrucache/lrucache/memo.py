"""`memoize`: cache a function's results in an `LRUCache`."""

import functools

from lrucache.cache import LRUCache

_MISSING = object()


def memoize(capacity=128):
    """Decorator: remember the results of the last `capacity` distinct calls.

    Arguments must be hashable. The cache is available as `wrapper.cache`.
    """

    def decorator(fn):
        cache = LRUCache(capacity)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            key = (args, tuple(sorted(kwargs.items())))
            result = cache.get(key, _MISSING)
            if result is _MISSING:
                result = fn(*args, **kwargs)
                cache.put(key, result)
            return result

        wrapper.cache = cache
        return wrapper

    return decorator
