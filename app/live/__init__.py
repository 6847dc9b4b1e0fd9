"""Live updates: a committed change wakes the open pages of its sender, who re-read the database.

A message carries only the event id: the database stays the truth, and a lost wake-up delays a
screen update, never a fact.
"""
