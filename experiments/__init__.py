"""Runnable experiment definitions; the built-in flagship configuration lives here."""
