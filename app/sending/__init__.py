"""Sending: the arq worker and its jobs, the queue and outbox, the mailer, the sweep, pause and
heartbeats."""
