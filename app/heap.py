"""The garbage collector in a long-lived process: what start-up built is never garbage."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def startup_heap_frozen() -> Iterator[None]:
    """Keep every object start-up made out of the collector's sight until the process stops
    serving.

    A full (generation 2) collection walks every tracked object: in the web about 100,000
    after start-up (modules, SQLAlchemy's tables and caches, the compiled templates), which
    took 35–40 ms on the bench machine, about every 2 s at 300 requests/s, and every request
    in flight waited for it (``make bench``, paced accept). Frozen, those objects are not
    walked; what requests allocate is collected as before. No collection first: freezing
    costs nothing, a collection of a test process's heap would cost every app start there,
    and the little start-up garbage frozen with the rest is given back to the collector on
    the way out, like everything else, so an app started and stopped inside one process (the
    tests) leaves nothing behind.
    """
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
