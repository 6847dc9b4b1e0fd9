"""Live updates: a committed change wakes the open pages of its sender, who re-read the database.

- ``wakeups``: the one way to announce a change (``Announcer``, on the sender's Redis channel);
- ``hub``: each web process's one pub/sub connection, ringing that sender's open streams, and
  its periodic check for wake-ups that never arrived;
- ``settle``: the PostgreSQL rule that ids can become visible out of order, in one place;
- ``paused``: whether sending is paused (no worker alive), shared by a process's streams.

The stream itself (``GET /convites/eventos``) is ``app.web.events``. The message carries only
the event id: the database stays the single source of truth, and a lost wake-up delays a screen
update, never a fact.
"""
