"""Writes: every state change of the domain is one function in a module here. It checks who
may do it, locks what it changes, changes it, journals it (`lifecycle.journal`) in the same
transaction, and enqueues its follow-ups on commit."""
