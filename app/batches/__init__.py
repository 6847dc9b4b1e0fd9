"""Batches: many invites at once, reviewed row by row before anything is written.

- ``parse``: pasted text, CSV or ``.xlsx`` → rows (with the line they came from), within
  ``Bounds``; ``isolation`` runs it in a child process;
- ``review``: each row's verdict (ok, invalid, repeated, already invited by this sender,
  bounced before);
- ``store``: the ``batches`` table, the one-transaction write of a whole batch, and its reads;
- ``progress``: a batch's counts per status and the few sentences a screen reader hears.

The web side is ``app.web.batches`` (pages) and ``app.web.batch_stream`` (its live stream).
"""
