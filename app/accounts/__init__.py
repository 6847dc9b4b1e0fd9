"""Accounts: senders, their sign-in links and server-side sessions."""
