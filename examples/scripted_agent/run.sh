#!/usr/bin/env bash
# End to end: a fresh CauterWeb (SQLite under a temp dir), the scripted agent as its HTTP replay
# harness, one imported failure trace and one candidate rule, validated by replay.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-.venv/bin/python}
WORK=$(mktemp -d)
export DATABASE_URL="sqlite:///$WORK/example.sqlite3"
export CAUTERWEB_REPLAY_BACKEND=http://127.0.0.1:8770/
export CAUTERWEB_REPLAY_HMAC_KEY=example-key
export CAUTERWEB_PUBLIC_URL=http://127.0.0.1:8001
export SECRET_KEY=example-secret

$PY manage.py migrate -v0
$PY manage.py runserver --noreload 127.0.0.1:8001 >"$WORK/server.log" 2>&1 &
SERVER=$!
PYTHONPATH=. $PY examples/scripted_agent/agent.py >"$WORK/agent.log" 2>&1 &
AGENT=$!
trap 'kill $SERVER $AGENT 2>/dev/null; rm -rf "$WORK"' EXIT
until $PY -c "import httpx; httpx.get('http://127.0.0.1:8001/api/v1/openapi.json')" 2>/dev/null; do sleep 0.2; done

$PY manage.py import_traces examples/scripted_agent/traces.otlp.json
$PY manage.py record_candidates examples/scripted_agent/candidate.jsonl
$PY manage.py validate --until-settled --timeout 120
$PY manage.py show_rule C-EX-1
