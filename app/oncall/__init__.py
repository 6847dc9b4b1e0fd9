"""What on-call does, in one place: look at stuck and failed invites, send them again, sweep.

- ``actions``: the reads and the bulk retry, shared by the page and the command line;
- ``page``: ``/operacao``, behind ``OPS_TOKEN``;
- ``commands``: ``python -m app status | reconcile | retry``.
"""
