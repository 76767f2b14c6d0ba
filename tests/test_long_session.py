"""Per-request bookkeeping in a long session stays proportional to the new
messages, also once old tool results are being cleared (past half the context):
counted by what KeSi serialises and walks, never by timing."""
import kesi


def tool_round(n: int, size: int) -> list[dict]:
    use = {"type": "tool_use", "id": f"toolu_{n}", "name": "list_files", "input": {}}
    return [{"role": "assistant", "content": [{"type": "text", "text": f"round {n}"}, use]},
            {"role": "user", "content": [kesi.tool_result(f"toolu_{n}", "y" * size, False)]}]


def size(n: int) -> int:
    return 600 if n % 10 == 0 else 400             # every tenth result can be cleared


def test_clearing_in_a_long_session_looks_only_at_the_new_messages(ws, monkeypatch):
    agent = kesi.Agent("main", kesi.MAIN_AGENT.tool_names)
    history = [{"role": "user", "content": "go"}]
    for n in range(2000):                          # 2,000 rounds, 6,000 blocks
        history += tool_round(n, size(n))
    tokens = kesi.estimate_tokens(history, agent)
    kesi.mark_request_size(agent, history, tokens)
    monkeypatch.setattr(kesi, "CONTEXT_WINDOW", int(tokens / 0.7))   # between clearing and compaction
    kesi.manage_context(None, history, agent)      # the first clearing walks everything once
    assert kesi.CLEARED_RESULT in str(history[2])

    serialised, walked = [], []
    json_chars, block_type = kesi.json_chars, kesi.block_type
    monkeypatch.setattr(kesi, "json_chars", lambda value: serialised.append(json_chars(value)) or serialised[-1])
    monkeypatch.setattr(kesi, "block_type", lambda block: walked.append(1) or block_type(block))
    for n in range(2000, 2025):                    # a request per round; some free a result
        history += tool_round(n, size(n))
        kesi.manage_context(None, history, agent)
        kesi.request_for(history, agent)           # marks the request's size, as each request does
    # The journal is about 1.3 million characters, 6,000 blocks.
    assert sum(serialised) < 25 * 4000 and len(walked) < 25 * 40, (sum(serialised), len(walked))
    whole = kesi.request_tokens(json_chars(history), agent)
    assert abs(kesi.estimate_tokens(history, agent) - whole) <= whole * 0.01



class Read(dict):
    """A meter entry that counts how often its cost is read."""
    reads = 0

    def __getitem__(self, key):
        Read.reads += key == "cost"
        return super().__getitem__(key)


def test_the_session_cost_is_summed_on_from_the_last_request():
    meter = kesi.Meter()
    for n in range(1000):
        meter.record({"input_tokens": 1000 + n, "output_tokens": 100})
    meter.calls[:] = [Read(c) for c in meter.calls]
    expected = sum(c["cost"] for c in meter.calls)
    assert meter.cost() == expected
    Read.reads = 0
    for _ in range(10):                            # as before each request under --max-budget-usd
        meter.record({"input_tokens": 1000, "output_tokens": 100})
        meter.calls[-1] = Read(meter.calls[-1])
        expected += meter.calls[-1]["cost"]
        assert meter.cost() == expected
    assert Read.reads <= 10 * 3
    meter.calls.clear()                            # a list replaced or cleared is summed again
    meter.record({"input_tokens": 10, "output_tokens": 1})
    assert meter.cost() == meter.calls[0]["cost"] and meter.cost(1) == 0
