"""--max-budget-usd with small budgets: real kesi.py -p children against the mock,
priced at the default model's list prices (Haiku 4.5: $1 in, $5 out per million)."""
import json
import subprocess
import sys

import pytest

import kesi
from checklib import ROOT, kesi_subprocess_env
from mock_api import MockAPI

KESI = str(ROOT / "kesi.py")


def cost_of(usage: dict) -> float:
    call = {"input": usage.get("input_tokens", 0), "output": usage.get("output_tokens", 0),
            "cache_write": usage.get("cache_creation_input_tokens", 0),
            "cache_read": usage.get("cache_read_input_tokens", 0), "cache_write_1h": 0, "model": "claude-haiku-4-5"}
    call["cache_write_1h"] = (usage.get("cache_creation") or {}).get("ephemeral_1h_input_tokens", 0)
    return kesi.request_cost(call)


@pytest.mark.parametrize("budget", [0.01, 0.05])
def test_a_small_budget_sends_capped_requests_and_ends_within_it(tmp_path, budget):
    with MockAPI(MockAPI.mode("loop")) as mock:
        proc = subprocess.run([sys.executable, KESI, "-p", "loop", "--max-budget-usd", str(budget),
                               "--output-format", "json", "--permission-mode", "bypassPermissions"],
                              cwd=tmp_path, capture_output=True, text=True, timeout=120,
                              env=kesi_subprocess_env(mock, KESI_SANDBOX="off", KESI_MAX_TURNS="100"))
    assert proc.returncode == 1, proc.stderr
    result = json.loads(proc.stdout)
    assert result["is_error"] and "budget (--max-budget-usd) is spent" in result["result"]
    assert result["max_budget_usd"] == budget and 0 < result["total_cost_usd"] <= budget
    costs = [cost_of(r["usage"]) for r in mock.requests]
    assert abs(sum(costs) - result["total_cost_usd"]) < 1e-6
    limits = [r["body"]["max_tokens"] for r in mock.requests]
    assert limits and all(kesi.BUDGET_FLOOR <= n <= kesi.output_ceiling(kesi.MODEL) for n in limits), limits
    assert limits[-1] < kesi.output_ceiling(kesi.MODEL)   # capped, not refused
    for n, limit in enumerate(limits):                     # a full reply to each would have fit too
        assert sum(costs[:n]) + limit * 5 / 1e6 <= budget
    assert "this request may write at most" in proc.stderr
