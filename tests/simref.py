"""A plain reference simulator of one serving engine, for tests/test_simulate.py.

Written from the rules in docs/simulation.md ("The engine"), one step at a time, one request object per
request, no aggregates, no jumps: slow and easy to check by reading. ``ccost.model.simulate.engine`` must give
the same times.

Rules, per step:
1. Requests whose arrival time is ≤ now join the end of the queue (in arrival order).
2. If nothing runs and nothing waits, time jumps to the next arrival.
3. mixed: every decoding running request is a row (one token); the prompts of running requests still
   prefilling take the rest of the budget in admission order (a chunk is min(left, budget)).
   prefill_first: if a running request is still prefilling, or the head of the queue could be admitted
   (cap and KV; never in a step that preempted), the step is a prefill step: prompt chunks only, up to
   the budget; else a decode step.
4. grow: if the running requests' KV after this step would exceed the cache, the newest running request
   is preempted (KV freed, produced tokens kept, back to the front of the queue to recompute prompt +
   produced tokens) and the step is composed again; a step that preempted admits nobody.
5. Then (mixed, or a prefill step) queue heads are admitted while budget is left, the cap is not reached
   and the KV cache has room (grow: cached prefix + first chunk, or + 1 for a decode-role request;
   reserve: prompt + output tokens), each taking a chunk of what budget is left.
6. A step with nothing in it (every running request was preempted) takes no time.
7. The step's time is the step model's; then rows gain a token (KV + 1), chunks add to KV; a prompt
   completed gives a token; requests whose tokens are all produced end at the step's end.
"""

from __future__ import annotations

import math


class Req:
    def __init__(self, i, arrival, prompt, cached, output, role):
        self.i = i
        self.arrival = arrival
        self.prompt = prompt
        self.cached = 0 if role == "decode" else cached
        self.output = output
        self.todo = 0 if role == "decode" else prompt - cached  # prompt tokens left to compute
        self.kv_start = prompt if role == "decode" else cached  # KV held when admitted
        self.kv = 0
        self.produced = 0
        self.admit = math.nan
        self.first = math.nan
        self.finish = math.nan


def reference(arrival, prompt, cached, output, engine, step, role="serve", until=None, clients=None):
    n = len(prompt)
    reqs = [Req(i, float(arrival[i]), int(prompt[i]), int(cached[i]), int(output[i]), role) for i in range(n)]
    B, cap = engine.max_batched_tokens, engine.max_seqs
    K = engine.kv_tokens if engine.kv_tokens is not None else math.inf
    grow = engine.kv_policy == "grow"
    mixed = engine.policy == "mixed" or role == "decode"
    released = clients if clients is not None else sum(1 for r in reqs if not math.isnan(r.arrival))
    want = set(range(n)) if until is None else set(int(i) for i in until)
    waiting, running = [], []
    nxt = 0
    now = 0.0
    preemptions = 0

    def used():
        return sum(r.kv for r in running) if grow else sum(r.prompt + r.output for r in running)

    def cost(r, chunk):  # KV the request adds when admitted with this chunk
        return r.kv_start + max(chunk, 1) if grow else r.prompt + r.output

    def end(r, t):
        nonlocal released
        r.finish = t
        running.remove(r)
        if clients is not None and released < n:
            reqs[released].arrival = t
            released += 1

    while any(math.isnan(reqs[i].finish) for i in want):
        while nxt < released and reqs[nxt].arrival <= now:
            waiting.append(reqs[nxt])
            nxt += 1
        if not running and not waiting:
            if nxt >= released:
                break
            now = reqs[nxt].arrival
            continue
        preempted = False
        while True:
            decoding = [r for r in running if r.todo == 0]
            prefilling = [r for r in running if r.todo > 0]
            if mixed:
                prefill_step = True
                rows = decoding
                budget = B - len(rows)
            else:
                head_ok = not preempted and bool(waiting) and len(running) < cap and (
                    used() + cost(waiting[0], min(waiting[0].todo, B)) <= K)
                prefill_step = bool(prefilling) or head_ok
                rows = [] if prefill_step else decoding
                budget = B
            chunks = []
            if prefill_step:
                for r in prefilling:
                    if budget <= 0:
                        break
                    c = min(r.todo, budget)
                    chunks.append((r, c))
                    budget -= c
            need = len(rows) + sum(c for _, c in chunks)
            if grow and used() + need > K:
                victim = running.pop()
                preemptions += 1
                victim.kv = 0
                victim.todo = victim.prompt + victim.produced - victim.cached
                victim.kv_start = victim.cached
                waiting.insert(0, victim)
                preempted = True
                continue
            break
        fresh = []
        if prefill_step and not preempted:
            while waiting and budget > 0 and len(running) < cap:
                r = waiting[0]
                c = min(r.todo, budget)
                if used() + need + cost(r, c) > K if grow else used() + cost(r, c) > K:
                    break
                waiting.pop(0)
                running.append(r)
                r.kv = r.kv_start
                if math.isnan(r.admit):
                    r.admit = now
                if c > 0:
                    chunks.append((r, c))
                    budget -= c
                    need += c
                else:
                    rows = rows + [r]
                    fresh.append(r)
                    budget -= 1
                    need += 1
        if not rows and not chunks:
            continue  # nothing to run (every running request preempted): no time passes
        context = sum(r.kv + 1 for r in rows)
        ptok = sum(c for _, c in chunks)
        pairs = sum(c * r.kv + c * (c + 1) // 2 for r, c in chunks)
        now = now + float(step(len(rows), context, ptok, pairs, len(chunks)))
        for r in rows:
            r.kv += 1
            r.produced += 1
            if math.isnan(r.first):
                r.first = now
        for r, c in chunks:
            r.kv += c
            r.todo -= c
            if r.todo == 0:
                if role == "prefill":
                    r.first = now
                    end(r, now)
                    continue
                r.produced += 1
                if math.isnan(r.first):
                    r.first = now
        for r in list(running):
            if role != "prefill" and r.todo == 0 and r.produced >= r.output:
                end(r, now)
    return ([r.admit for r in reqs], [r.first for r in reqs], [r.finish for r in reqs],
            [r.arrival for r in reqs], preemptions)
