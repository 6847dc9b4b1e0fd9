"""Webhooks: an account's URLs (``store``), the guard on where they point (``addresses``), and the
signed delivery of every status change (``deliver``), each delivery a row with its own state."""
