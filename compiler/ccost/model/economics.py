"""Money and power of a plan: cost per hour, per million tokens and per month, power and tokens
per joule.

One set of formulas, written once over numbers, runs in the three modes of ``ccost.derive``: floats
(``ccost eval``, the review), arrays (``search ... objective = cost_per_token``) and derivation values
(``ccost explain``), so every cost number in a review is the one ``explain`` derives.

The model, in words (the review says it too):

* **Price of a GPU-hour** ``p_GPU``: the cluster's ``price_per_gpu_hour``, else its ``price_per_node_hour``
  / ``gpus_per_node``, else the GPU's ``price_per_hour``. Without any, the plan is *not priced*: its cost
  numbers are null, and a cost search or a ``max_cost_per_mtok`` policy on it is an error (E403).
* **Power per GPU** ``P_GPU``: the cluster's ``node_power`` / ``gpus_per_node``, else the GPU's ``power``
  (its TDP: the upper bound of what it draws busy) + the node's ``host_power`` / ``gpus_per_node``, or,
  when the cluster gives no host power, the plan's stack's ``host_power`` (per GPU).
  The plan's facility power ``P = N·P_GPU·PUE``.
* **Cost per hour** ``C_hour = (N·p_GPU + P·p_E)·1 h``: the N GPUs the plan uses (tp·pp·ep·dp, ·cp) at their
  price, plus the energy bill at ``electricity_price`` p_E (0 unless given: a cloud price includes power).
* **Cost per million tokens** at the plan's ``load`` (the share of the month it runs at its throughput;
  the GPUs are paid for every hour): ``C_Mtok = C_rate·10⁶ / (throughput·load)``. Tokens are the plan's
  phase's: output tokens for decode, input (prompt) tokens for prefill, training tokens for train.
* **Monthly cost** ``C_month = C_rate·730 h`` (8,760 h / 12), paid whatever the load; the month serves
  ``throughput·load·730 h`` tokens.
* **Tokens per joule** ``throughput / P`` and **energy per token** ``P / throughput``, at full load,
  facility power included (PUE), the GPUs at TDP.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ccost import derive, units
from ccost import spec as S
from ccost.derive import named
from ccost.schema import phase_kind

Num = Any

HOUR_S = 3600.0
#: A month of 730 hours: a year of 8,760 hours over 12 (what cloud providers bill a month as).
MONTH_S = 730.0 * HOUR_S
MTOK = 1e6

@dataclass(frozen=True)
class Pricing:
    """The money and power inputs of one cluster, resolved (SI floats: USD/s, W, USD/J) with where each
    came from. ``price_gpu`` and ``power_gpu`` are None when nothing gives them."""

    price_gpu: float | None  # USD/s per GPU
    price_node: float | None  # USD/s per node, when the price is per node
    price_source: str | None
    gpu_power: float | None  # W, the GPU's TDP (None when node_power is given or nothing is)
    node_power: float | None  # W per whole node
    host_power: float  # W per node besides the GPUs
    power_source: str | None
    gpus_per_node: int
    pue: float
    electricity_price: float  # USD/J
    cluster: str = ""

    @property
    def priced(self) -> bool:
        return self.price_gpu is not None or self.price_node is not None

    @property
    def powered(self) -> bool:
        return self.node_power is not None or self.gpu_power is not None


def pricing(cluster: S.Cluster) -> Pricing:
    gpu = cluster.gpu
    g = cluster.gpus_per_node
    price_gpu = price_node = None
    source = None
    if cluster.price_per_gpu_hour is not None:
        price_gpu, source = cluster.price_per_gpu_hour, f"cluster {cluster.name}: price_per_gpu_hour"
    elif cluster.price_per_node_hour is not None:
        price_node, source = cluster.price_per_node_hour, f"cluster {cluster.name}: price_per_node_hour"
    elif gpu is not None and gpu.price_per_hour is not None:
        price_gpu, source = gpu.price_per_hour, f"gpu {gpu.name}: price_per_hour"
    gpu_power = node_power = None
    psource = None
    if cluster.node_power is not None:
        node_power, psource = cluster.node_power, f"cluster {cluster.name}: node_power"
    elif gpu is not None and gpu.power is not None:
        gpu_power, psource = gpu.power, f"gpu {gpu.name}: power (TDP)"
    return Pricing(price_gpu, price_node, source, gpu_power, node_power, cluster.host_power or 0.0, psource,
                   g, cluster.pue, cluster.electricity_price or 0.0, cluster.name)


@dataclass(frozen=True)
class Economics:
    """The cost and power numbers of one plan (floats, arrays or Values); None where not priced / no power."""

    token_kind: str
    load: Num
    price_gpu: Num  # USD/s per GPU
    power_gpu: Num  # W per GPU, host share included, before PUE
    power: Num  # W, the plan's facility power
    cost_rate: Num  # USD/s
    cost_hour: Num  # USD for one hour
    cost_month: Num  # USD for a month
    cost_mtok: Num  # USD per million tokens at the load
    tokens_month: Num  # tokens served in a month at the load
    energy_token: Num  # J per token
    tokens_per_joule: Num  # tokens per J

    @property
    def priced(self) -> bool:
        return self.cost_rate is not None

    @property
    def values(self) -> list:
        """Every number, for ``derive.steps`` (the derivation lists the ones that exist)."""
        return [v for v in (self.price_gpu, self.power_gpu, self.power, self.cost_rate, self.cost_hour,
                            self.cost_month, self.cost_mtok, self.tokens_month, self.energy_token,
                            self.tokens_per_joule) if v is not None]


def _leaf(derivation: bool, name: str, value: float, dim, desc: str, source: str | None, style=None):
    return derive.leaf(name, value, dim, desc, source, style=style) if derivation else value


def economics(plan: S.Plan, pr: Pricing, gpus: Num, throughput: Num, derivation: bool = False) -> Economics:
    """The plan's money and power from its GPUs ``gpus`` (tp·pp·ep·dp) and ``throughput`` (tokens/s), in
    the mode of those two (floats, arrays or Values; ``derivation`` makes the inputs leaves)."""
    D = derivation
    kind = phase_kind(plan.phase).token_kind  # which tokens the phase's throughput counts
    sub = {"output": "out", "input": "in", "training": "train"}[kind]
    load = _leaf(D, "load", plan.load, units.DIMENSIONLESS, "share of the month the plan runs at its throughput",
                 f"plan {plan.name}" + ("" if "load" in plan.spans else " (default: 100 %)"), style="percent")
    g = _leaf(D, "G", float(pr.gpus_per_node), units.DIMENSIONLESS, "GPUs per node", f"cluster {pr.cluster}")
    price_gpu = None
    if pr.price_gpu is not None:
        price_gpu = _leaf(D, "p_GPU", pr.price_gpu, units.MONEY_RATE, "price of one GPU-hour", pr.price_source)
    elif pr.price_node is not None:
        p_node = _leaf(D, "p_node", pr.price_node, units.MONEY_RATE, "price of one node-hour", pr.price_source)
        price_gpu = named("p_GPU", p_node / g, "price of one GPU-hour: p_node / G")
    power_gpu = power = None
    if pr.node_power is not None:
        p_node_w = _leaf(D, "P_node", pr.node_power, units.POWER, "power of one node", pr.power_source)
        power_gpu = named("P_GPU", p_node_w / g, "power per GPU, host share included: P_node / G")
    elif pr.gpu_power is not None:
        tdp = _leaf(D, "P_TDP", pr.gpu_power, units.POWER, "power of one GPU under load", pr.power_source)
        stack = plan.stack  # the checker's: the plan's own, or its phase's bundled default
        if pr.host_power:
            host = _leaf(D, "P_host", pr.host_power, units.POWER, "power of one node besides its GPUs",
                         f"cluster {pr.cluster}: host_power")
            power_gpu = named("P_GPU", tdp + host / g, "power per GPU, host share included: P_TDP + P_host / G")
        elif stack.host_power:
            host = _leaf(D, "P_host,GPU", stack.host_power, units.POWER, "host power per GPU of the stack's "
                         "host work", f"stack {stack.name}: host_power")
            power_gpu = named("P_GPU", tdp + host, "power per GPU, the stack's host share included: "
                              "P_TDP + P_host,GPU")
        else:
            power_gpu = tdp
    if power_gpu is not None:
        pue = _leaf(D, "PUE", pr.pue, units.DIMENSIONLESS, "facility power / IT power", f"cluster {pr.cluster}: pue" +
                    ("" if pr.pue != 1.0 else " (default: 1, the IT power alone)"))
        power = named("P", gpus * power_gpu * pue, "facility power of the plan's GPUs: N·P_GPU·PUE")
    cost_rate = cost_hour = cost_month = cost_mtok = tokens_month = None
    hour = _leaf(D, "t_hour", HOUR_S, units.TIME, "one hour", None)
    month = _leaf(D, "t_month", MONTH_S, units.TIME, "one month: 8,760 h / 12 = 730 h", None)
    if price_gpu is not None:
        rate = gpus * price_gpu
        if pr.electricity_price and power is not None:
            p_e = _leaf(D, "p_E", pr.electricity_price, units.ENERGY_PRICE, "price of energy",
                        f"cluster {pr.cluster}: electricity_price")
            cost_rate = named("C_rate", rate + power * p_e, "cost per hour: N·p_GPU + P·p_E")
        else:
            cost_rate = named("C_rate", rate, "cost per hour of the plan's GPUs: N·p_GPU")
        cost_hour = named("C_hour", cost_rate * hour, "cost of one hour: C_rate·1 h")
        cost_month = named("C_month", cost_rate * month, "cost of one month, paid whatever the load: C_rate·730 h")
        mtok = derive.constant(MTOK, "10⁶", cost_rate, throughput)
        cost_mtok = named(f"C_Mtok,{sub}", cost_rate * mtok / (throughput * load),
                          f"cost per million {kind} tokens at the load: C_rate·10⁶/(throughput·load)")
    tokens_month = named("tokens_month", throughput * load * month,
                         f"{kind} tokens in a month at the load: throughput·load·730 h")
    energy_token = tokens_per_joule = None
    if power is not None:
        energy_token = named("E_token", power / throughput, f"energy per {kind} token at full load: P / throughput")
        tokens_per_joule = named("tokens_per_J", throughput / power,
                                 f"{kind} tokens per joule of facility energy: throughput / P")
    return Economics(kind, load, price_gpu, power_gpu, power, cost_rate, cost_hour, cost_month, cost_mtok,
                     tokens_month, energy_token, tokens_per_joule)


def not_priced_help(cluster: S.Cluster) -> str:
    """How to price a plan on ``cluster``: the fix a diagnostic and the review show."""
    gpu = cluster.gpu.name if cluster.gpu is not None else "its gpu"
    return (f"give gpu `{gpu}` a `price_per_hour` (e.g. `price_per_hour = 3.78 USD/h`) or cluster "
            f"`{cluster.name}` a `price_per_gpu_hour` or `price_per_node_hour`")
