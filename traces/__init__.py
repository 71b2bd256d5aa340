"""Agent traces in (semantics §19): parsers for OpenTelemetry GenAI (OTLP JSON and protobuf),
OpenInference, Langfuse exports and Inspect AI eval logs; readers of the logs coding agents
write themselves (Claude Code, Codex CLI, OpenHands, SWE-agent: `logs`), from files, trees and
archives read safely (`sources`), secrets redacted (`redact`); and signature derivation.

Every module here is pure: plain data in, plain trajectory dicts out, no Django.
`lifecycle.services.traces` hands the result to the corpus import.
"""
