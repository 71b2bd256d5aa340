"""A tiny scripted agent, served as an HTTP replay harness (semantics §14).

It re-runs a recorded failure: it reads the rules for its state through the rule tool and
pushes safely only when a rule tells it to pull first. Swap `replay` for your agent."""

import os

from cauterweb.client import serve_harness


def replay(case, rule_tool, mark_started, arm):
    mark_started()  # the environment is ready: the engine's replay timeout starts now
    rules = rule_tool(scope="git", query="action:git.push error:non_fast_forward")
    metrics = dict(case.trajectory["metrics"])
    if any("pull" in rule["directive"].lower() for rule in rules):
        metrics.update(task_completion=0.95, outcome_correct=1.0)
    return {"traces": [{"metrics": metrics}]}


if __name__ == "__main__":
    serve_harness(replay, key=os.environ["CAUTERWEB_REPLAY_HMAC_KEY"], port=8770)
