"""Invites: statuses, records, validation, the state machine (transitions) and reads."""
