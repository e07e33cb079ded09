"""One serving engine (a replica, or a prefill or decode worker) under continuous batching: the
event-jumping simulator (docs/simulation.md, "The engine").

Each engine step is scheduled as vLLM V1 (``policy = "mixed"``) or SGLang (``"prefill_first"``) does:

* **mixed** (vLLM V1 ``vllm/v1/core/sched/scheduler.py``, ``Scheduler.schedule``; SGLang with
  ``--enable-mixed-chunk``): every running request that is decoding takes one token of the step's budget
  (``max_batched_tokens``), then the prompts already admitted and not yet prefilled take what is left in
  admission order, then waiting requests are admitted first come first served while budget, the cap on
  running requests (``max_seqs``) and the KV cache allow; a prompt larger than what is left is split
  (chunked prefill) and several prompts share a step.
* **prefill_first** (SGLang ``scheduler.py``, ``get_next_batch_to_run``: "Run prefill first if possible";
  ``schedule_policy.py``, ``PrefillAdder``): if a prefill batch can be formed (the prompt being chunked,
  then waiting requests FCFS, up to ``max_batched_tokens`` = SGLang's ``chunked_prefill_size``, the cap and
  the KV cache), the step is that prefill batch alone and the decoding requests wait; else the step
  decodes every running request.

The step that computes a prompt's last token also samples its first output token; each later step that
decodes it gives one more. KV cache (``kv_tokens``, in tokens) is held per request:

* **grow** (vLLM V1): a request holds what it has computed (its prefix-cache hit, its prompt chunks, one
  token per decode step). Admission needs room for the request's cached prefix and first chunk. When a
  step's new tokens do not fit, the most recently admitted running request is preempted (vLLM's FCFS
  choice, ``self.running.pop()``), its KV cache freed and it goes back to the front of the queue to be
  recomputed (prompt and the tokens it had generated) when admitted again; a step that preempts admits
  nothing new.
* **reserve**: admission needs room for the whole request, prompt + output tokens, held until it ends
  (SGLang's admission also reserves output tokens, a decaying share of them; this is the conservative
  end of it). Nothing is ever preempted.

Speed: a step that only decodes (no prompt in it, and no admission possible) is followed by identical
steps — same rows, context growing by one token a row — until a request ends, a request arrives that
could be admitted, or (grow) the KV cache fills. Those k steps are priced in one vectorised call of the
step model and advanced at once; only steps with prompt chunks, admissions or preemptions are taken one
at a time. The result is the same as stepping one at a time (the test suite checks it against a plain
step-by-step simulator), up to float rounding of the summed times, which is kept identical by summing in
the same order.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass

import numpy as np

POLICIES = ("mixed", "prefill_first")
KV_POLICIES = ("grow", "reserve")
ROLES = ("serve", "prefill", "decode")
#: the most steps one jump prices at once (bounds the arrays; a longer stretch is two jumps)
MAX_JUMP = 1 << 15


class EngineError(ValueError):
    """An engine configuration or a request the engine cannot run; the message names it and the fix."""


@dataclass(frozen=True)
class Engine:
    """An engine's scheduling limits and policies (see the module docstring).

    ``max_seqs``: running requests at most (vLLM ``max_num_seqs``, SGLang ``--max-running-requests``).
    ``max_batched_tokens``: tokens per step at most (vLLM ``max_num_batched_tokens``); for
    ``prefill_first`` the prompt tokens of a prefill step (SGLang ``--chunked-prefill-size``).
    ``kv_tokens``: KV cache capacity in tokens, None for unlimited.
    """

    max_seqs: int = 256
    max_batched_tokens: int = 8192
    kv_tokens: int | None = None
    policy: str = "mixed"
    kv_policy: str = "grow"

    def __post_init__(self) -> None:
        for name in ("max_seqs", "max_batched_tokens"):
            v = getattr(self, name)
            if int(v) != v or v < 1:
                raise EngineError(f"{name} must be a whole number ≥ 1; got {v!r}")
        if self.kv_tokens is not None and (int(self.kv_tokens) != self.kv_tokens or self.kv_tokens < 1):
            raise EngineError(f"kv_tokens must be a whole number ≥ 1 (or None: unlimited); got {self.kv_tokens!r}")
        if self.policy not in POLICIES:
            raise EngineError(f"policy {self.policy!r} is not one of {', '.join(POLICIES)}")
        if self.kv_policy not in KV_POLICIES:
            raise EngineError(f"kv_policy {self.kv_policy!r} is not one of {', '.join(KV_POLICIES)}")
        if self.policy == "mixed" and self.max_batched_tokens < self.max_seqs:
            raise EngineError(f"max_batched_tokens = {self.max_batched_tokens} is below max_seqs = {self.max_seqs}: "
                              "every running request must be able to decode in one step (vLLM refuses it too)")


@dataclass(frozen=True)
class EngineRun:
    """What one engine did: per request (in the order given) and per segment of steps.

    ``admit`` is when the request was first scheduled (the start of the step that first took it); ``first`` the end of the step that gave its first output token (for a
    prefill worker: the end of its prefill); ``finish`` the end of the step that gave its last token;
    NaN where the run stopped first (inf for a request it had to finish: ``max_events``). ``segments`` has one row per step or jump:
    (start, end, steps, decode_rows, prefill_tokens, running, output_tokens).
    """

    admit: np.ndarray
    first: np.ndarray
    finish: np.ndarray
    arrival: np.ndarray  # as given, with a closed loop's later arrivals filled in
    segments: np.ndarray  # float, shape (n, 7)
    preemptions: int
    steps: int
    stopped: bool = False  # at ``max_events``: the ``until`` requests not finished have an infinite finish


def run_engine(arrival: np.ndarray, prompt: np.ndarray, cached: np.ndarray, output: np.ndarray, engine: Engine,
               step, *, role: str = "serve", until: np.ndarray | None = None,
               clients: int | None = None, max_events: int | None = None) -> EngineRun:
    """Simulate one engine over requests given in arrival order.

    ``role``: ``serve`` (prefill then decode), ``prefill`` (a disaggregated prefill worker: a request ends
    when its prompt is computed) or ``decode`` (a disaggregated decode worker: the prompt's KV cache
    arrives whole, and every output token is a decode step). ``until``: indices of the requests whose
    end ends the run (default: all). ``clients``: a closed loop of that many clients: requests 0 …
    clients−1 arrive at t = 0 and request i ≥ clients when the (i − clients + 1)-th request to finish
    finishes; ``arrival`` is then ignored past the first ``clients``. ``max_events``: the most scheduling
    rounds (a step, or a stretch of decode steps) before the run stops with the ``until`` requests still
    unfinished given an infinite finish (and first token, if they had none): an engine that falls ever
    further behind (a queue that grows without bound) otherwise costs time in proportion to its backlog.
    """
    if role not in ROLES:
        raise EngineError(f"role {role!r} is not one of {', '.join(ROLES)}")
    n = len(prompt)
    I = [int(v) for v in prompt]
    cach = [int(v) for v in cached]
    O = [int(v) for v in output]
    arr = [float(v) for v in arrival]
    B, cap = engine.max_batched_tokens, engine.max_seqs
    K = engine.kv_tokens if engine.kv_tokens is not None else math.inf
    grow = engine.kv_policy == "grow"
    mixed = engine.policy == "mixed" or role == "decode"
    if role == "decode":
        cach = [0] * n
    _check_fit(I, O, role, engine)

    # per request: prompt tokens still to compute, KV tokens held (prefilling) or at decode start,
    # tokens produced, the decode counter when its decoding (re)started, and its state
    pf = [0 if role == "decode" else I[i] - cach[i] for i in range(n)]
    kv0 = [I[i] if role == "decode" else cach[i] for i in range(n)]  # KV it holds on admission
    held = [0] * n
    produced = [0] * n
    g0 = [0] * n
    cstart = [0] * n
    fin_g = [0] * n
    state = [0] * n  # 0 outside, 1 prefilling, 2 decoding, 3 done
    admit = [math.nan] * n
    first = [math.nan] * n
    fin = [math.nan] * n

    waiting: deque[int] = deque()
    run: dict[int, None] = {}  # running requests in admission order
    pre: list[int] = []  # running requests still prefilling, in admission order
    heap: list[tuple[int, int]] = []  # (decode counter at which it ends, id)
    d = 0  # requests decoding
    S0 = 0  # Σ (cstart − g0) over decoding: their context at counter G is S0 + d·G (+1 per row this step)
    U = 0  # KV tokens held (grow) or reserved (reserve)
    G = 0  # decode steps so far (the counter every decoding request advances with)
    T = 0.0
    a = 0  # next request to arrive
    closed = clients is not None
    n_known = min(clients, n) if closed else sum(1 for v in arr if not math.isnan(v))
    todo = set(range(n)) if until is None else {int(i) for i in until}
    left = len(todo)
    segs: list[tuple] = []
    preemptions = 0
    nsteps = 0

    def finish(i: int, t: float) -> None:
        nonlocal left, n_known
        state[i] = 3
        fin[i] = t
        del run[i]
        if i in todo:
            left -= 1
        if closed and n_known < n:
            arr[n_known] = t
            n_known += 1

    def start_decode(i: int) -> None:
        nonlocal d, S0
        state[i] = 2
        g0[i] = G
        cstart[i] = held[i]
        fin_g[i] = G + O[i] - produced[i]
        heapq.heappush(heap, (fin_g[i], i))
        d += 1
        S0 += cstart[i] - G

    def preempt(i: int) -> None:
        nonlocal d, S0, U, preemptions
        preemptions += 1
        if state[i] == 2:
            produced[i] += G - g0[i]
            if grow:
                U -= cstart[i] + G - g0[i]
            d -= 1
            S0 -= cstart[i] - g0[i]
        else:
            pre.remove(i)
            if grow:
                U -= held[i]
        if not grow:
            U -= I[i] + O[i]
        del run[i]
        state[i] = 0
        held[i] = 0
        # recompute: the prompt and every token generated so far (the prefix-cache hit stays a hit)
        pf[i] = I[i] + produced[i] - cach[i]
        kv0[i] = cach[i]
        waiting.appendleft(i)

    def admit_one(i: int, chunk: int, need: int) -> bool:
        """Admit the head of the queue if the cap and the KV cache allow; ``need``: this step's other KV."""
        nonlocal U
        if grow:
            if U + need + kv0[i] + max(chunk, 1) > K:
                return False
            U += kv0[i]
        else:
            if U + I[i] + O[i] > K:
                return False
            U += I[i] + O[i]
        waiting.popleft()
        run[i] = None
        held[i] = kv0[i]
        if math.isnan(admit[i]):
            admit[i] = T
        if pf[i] > 0:
            state[i] = 1
            pre.append(i)
        else:
            start_decode(i)
            fresh.append(i)
        return True

    events = 0
    stopped = False
    while left > 0:
        events += 1
        if max_events is not None and events > max_events:
            stopped = True
            break
        while a < n_known and arr[a] <= T:
            waiting.append(a)
            a += 1
        if not run and not waiting:
            if a >= n_known:
                break  # nothing can arrive any more (a burst that is over, or a closed loop that ended)
            T = arr[a]
            continue

        # ---- compose the step ------------------------------------------------------------------------
        fresh: list[int] = []  # decode-role requests admitted now: their first token ends this step
        chunks: list[tuple[int, int]] = []
        preempted = False
        decode_step = True  # prefill_first: False for a prefill-only step
        while True:
            chunks = []
            tot = 0
            if mixed:
                budget = B - d
                for i in pre:
                    if budget <= 0:
                        break
                    c = pf[i] if pf[i] < budget else budget
                    chunks.append((i, c))
                    budget -= c
                    tot += c
                need = d + tot
            else:
                # a prefill batch: the prompt being chunked, or a queue head that can be admitted (not
                # in a step that preempted: it admits nobody)
                decode_step = not pre and not (not preempted and waiting and len(run) < cap and _fits_alone(
                    waiting[0], pf, kv0, I, O, U, K, grow, B))
                budget = B
                if not decode_step:
                    for i in pre:
                        if budget <= 0:
                            break
                        c = pf[i] if pf[i] < budget else budget
                        chunks.append((i, c))
                        budget -= c
                        tot += c
                need = tot if not decode_step else d
            if grow and U + need > K and run:
                victim = next(reversed(run))
                preempt(victim)
                preempted = True
                continue
            break
        if not preempted and (mixed or not decode_step):
            while waiting and budget > 0 and len(run) < cap:
                i = waiting[0]
                c = pf[i] if pf[i] < budget else budget
                if not admit_one(i, c, need):
                    break
                if c > 0:
                    chunks.append((i, c))
                    budget -= c
                    tot += c
                    need += c
                else:  # a decode-role request: one row of this step
                    budget -= 1
                    need += 1
        rows = d if (mixed or decode_step) else 0
        if rows == 0 and not chunks:
            if run:
                raise AssertionError("an empty step with requests running")  # pragma: no cover
            continue  # every running request was preempted: an empty schedule, then the queue is admitted

        # ---- a stretch of decode-only steps: advance them at once --------------------------------------
        if not chunks and rows > 0:
            while heap and (state[heap[0][1]] != 2 or fin_g[heap[0][1]] != heap[0][0]):
                heapq.heappop(heap)
            k = heap[0][0] - G
            if grow and K != math.inf:
                k = min(k, int((K - U) // rows))
            # a step that preempted admitted nobody; the next one may: it is not part of the stretch
            k = 1 if preempted else max(1, min(k, MAX_JUMP))
            if k == 1:
                ends = [T + float(step(rows, S0 + rows * (G + 1), 0, 0, 0))]
            else:
                # an arrival that may be admitted ends the stretch at the first step boundary after it;
                # price the steps in growing blocks so that a near arrival does not price a long stretch
                ta = arr[a] if not waiting and a < n_known else math.inf
                ends = _stretch(step, rows, S0 + rows * (G + 1), k, T, ta)
                k = len(ends)
            start = T
            T = float(ends[k - 1])
            G0 = G
            G += k
            if grow:
                U += rows * k
            nsteps += k
            done = 0
            for i in fresh:
                first[i] = float(ends[0])
            while heap and heap[0][0] <= G:
                g, i = heapq.heappop(heap)
                if state[i] != 2 or fin_g[i] != g:
                    continue
                produced[i] = O[i]
                if grow:
                    U -= cstart[i] + g - g0[i]
                else:
                    U -= I[i] + O[i]
                d -= 1
                S0 -= cstart[i] - g0[i]
                finish(i, float(ends[g - G0 - 1]))
                done += 1
            segs.append((start, T, k, rows, 0, len(run) + done, rows * k))
            continue

        # ---- one step with prompt chunks (and maybe decode rows) ---------------------------------------
        pairs = 0
        for i, c in chunks:
            s = held[i]
            pairs += c * s + c * (c + 1) // 2
        ctx = S0 + rows * (G + 1) if rows else 0
        running = len(run)
        t = float(step(rows, ctx, tot, pairs, len(chunks)))
        start = T
        T = T + t
        nsteps += 1
        out_tokens = rows
        if rows:
            G += 1
            if grow:
                U += rows
        for i in fresh:
            first[i] = T
        for i, c in chunks:
            held[i] += c
            pf[i] -= c
            if grow:
                U += c
            if pf[i] == 0:
                pre.remove(i)
                if role == "prefill":
                    first[i] = T
                    if not grow:
                        U -= I[i] + O[i]
                    else:
                        U -= held[i]
                    finish(i, T)
                    continue
                produced[i] += 1
                out_tokens += 1
                if math.isnan(first[i]):
                    first[i] = T
                if produced[i] >= O[i]:
                    U -= held[i] if grow else I[i] + O[i]
                    finish(i, T)
                else:
                    start_decode(i)
        while heap and heap[0][0] <= G:
            g, i = heapq.heappop(heap)
            if state[i] != 2 or fin_g[i] != g:
                continue
            produced[i] = O[i]
            U -= (cstart[i] + g - g0[i]) if grow else I[i] + O[i]
            d -= 1
            S0 -= cstart[i] - g0[i]
            finish(i, T)
        segs.append((start, T, 1, rows, tot, running, out_tokens))

    if stopped:
        for i in todo:
            if state[i] != 3:
                fin[i] = math.inf
                if math.isnan(first[i]):
                    first[i] = math.inf
    return EngineRun(np.array(admit), np.array(first), np.array(fin), np.array(arr),
                     np.array(segs, dtype=float).reshape(-1, 7), preemptions, nsteps, stopped)


def _stretch(step, rows: int, ctx0: int, k: int, T: float, ta: float) -> np.ndarray:
    """End times of up to ``k`` decode-only steps of ``rows`` rows starting at ``T`` (the j-th at context
    ``ctx0 + rows·j``), cut after the first that ends at or after ``ta``. Summed in order from ``T``, as one
    step at a time would sum them; or, when the step model gives its decode step as a line in the context
    (``decode_line``), in closed form (``_Line``: the same times to rounding)."""
    out: list[np.ndarray] = []
    done, block, t = 0, 16, T
    line = getattr(step, "decode_line", None)
    line = line(rows) if line is not None else None
    if line is not None:
        return _Line.of(T, line[0] + line[1] * ctx0, line[1] * rows, k, ta)
    while done < k:
        m = min(block, k - done)
        ctx = ctx0 + rows * np.arange(done, done + m)
        times = step(rows, ctx, 0, 0, 0)
        if np.ndim(times) == 0:
            times = np.full(m, float(times))
        ends = np.cumsum(np.concatenate(([t], times)))[1:]
        if ends[-1] >= ta:
            out.append(ends[: int(np.searchsorted(ends, ta, side="left")) + 1])
            break
        out.append(ends)
        t = float(ends[-1])
        done += m
        block *= 4
    return out[0] if len(out) == 1 else np.concatenate(out)


class _Line:
    """The end times of a stretch of decode-only steps whose times grow linearly (a step model's
    ``decode_line``): the j-th ends at T + (j + 1)·a + b·j(j + 1)/2 (a: the first step, b: what each step
    adds, the context growing by a row each), in closed form, so a stretch costs the same whatever its length;
    indexed like the array ``_stretch`` returns. (A plain class with slots: one is made per stretch, tens of
    thousands a simulation, and a frozen dataclass's constructor cost a third of the stretch.)"""

    __slots__ = ("T", "a", "b", "k")

    def __init__(self, T: float, a: float, b: float, k: int) -> None:
        self.T, self.a, self.b, self.k = T, a, b, k

    @staticmethod
    def of(T: float, a: float, b: float, k: int, ta: float) -> "_Line":
        """Up to ``k`` steps, cut after the first that ends at or after ``ta``."""
        line = _Line(T, a, b, k)
        if ta < math.inf and line[k - 1] >= ta:
            # the least j with T + (j + 1)·a + b·j(j + 1)/2 ≥ ta: the root of the quadratic, then checked
            x = ta - T
            if b > 0:
                j = max(0, int(math.floor((-(a + b / 2) + math.sqrt((a + b / 2) ** 2 + 2 * b * x)) / b)) - 1)
            else:
                j = max(0, int(math.floor(x / a)) - 1)
            while j > 0 and line[j - 1] >= ta:
                j -= 1
            while line[j] < ta:
                j += 1
            line = _Line(T, a, b, j + 1)
        return line

    def __len__(self) -> int:
        return self.k

    def __getitem__(self, j: int) -> float:
        return self.T + (j + 1) * self.a + self.b * (j * (j + 1) / 2)


def _fits_alone(i, pf, kv0, I, O, U, K, grow, B) -> bool:
    """prefill_first: can the head of the queue be admitted into a prefill batch now (KV)?"""
    if grow:
        return U + kv0[i] + max(min(pf[i], B), 1) <= K
    return U + I[i] + O[i] <= K


def _check_fit(I: list, O: list, role: str, engine: Engine) -> None:
    """Every request must fit in an empty engine's KV cache, else it could never run (vLLM refuses a
    request longer than the model length the cache holds)."""
    if engine.kv_tokens is None:
        return
    worst = max(range(len(I)), key=lambda i: I[i] + (O[i] if role != "prefill" else 0))
    need = I[worst] + (O[worst] if role != "prefill" else 0)
    if need > engine.kv_tokens:
        raise EngineError(f"a request of {I[worst]:,} prompt + {O[worst]:,} output tokens needs {need:,} tokens of "
                          f"KV cache; the engine holds {engine.kv_tokens:,}: give the engine more KV cache or "
                          "cap the request lengths")
