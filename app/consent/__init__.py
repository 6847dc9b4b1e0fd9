"""Consent: who may be invited, and a person's data taken out or forgotten."""
