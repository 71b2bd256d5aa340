"""Reads for the dashboard, the API and the commands, each a fixed number of queries."""
