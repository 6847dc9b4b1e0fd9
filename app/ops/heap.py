"""The garbage collector in a long-lived process: what start-up built is never garbage, and full
collections are spaced out while it serves."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

#: How many times further apart full collections run while a process serves (see below).
FULL_COLLECTION_SPACING = 10


@contextmanager
def collector_tuned_for_serving() -> Iterator[None]:
    """Keep every object start-up made out of the collector's sight until the process stops
    serving.

    A full (generation 2) collection walks every tracked object: in the web about 100,000
    after start-up (modules, SQLAlchemy's tables and caches, the compiled templates), which
    took 35–40 ms on the bench machine, about every 2 s at 300 requests/s, and every request
    in flight waited for it (``make bench``, paced accept). The worker's process does the same
    (``app.sending.worker``): there a full collection took about 30 ms, some of them while it held
    the
    database's write turn that the web and other workers wait for. Frozen, those objects are not
    walked; what requests allocate is collected as before. No collection first: freezing
    costs nothing, a collection of a test process's heap would cost every app start there,
    and the little start-up garbage frozen with the rest is given back to the collector on
    the way out, like everything else, so an app started and stopped inside one process (the
    tests) leaves nothing behind.

    Full collections also run ``FULL_COLLECTION_SPACING`` times further apart while it serves.
    What serving builds is walked too: a web holding 1,000 open streams tracks about 210,000
    objects (about 195 per stream, most of them the middleware chain's suspended coroutines
    and their closures), and a full collection of those took 95–106 ms, about every 9 s under
    the live benchmark's burst, while every stream's next row waited. Young objects are
    collected as often as before; cyclic garbage that outlived two younger collections waits
    longer for the full one.
    """
    gc.freeze()
    young, middle, full = gc.get_threshold()
    gc.set_threshold(young, middle, full * FULL_COLLECTION_SPACING)
    try:
        yield
    finally:
        gc.set_threshold(young, middle, full)
        gc.unfreeze()
