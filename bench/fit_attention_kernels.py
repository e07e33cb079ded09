"""Fit the published attention-kernel curves of std/gpus.ccost (the `h100_flash2`, `h100_cudnn` blocks).

    python bench/fit_attention_kernels.py

AIConfigurator's tables (std/kernels.ccost) time the attention kernels the serving engines run: on Hopper,
FlashAttention-3 (vLLM, SGLang) and TensorRT-LLM's own. A training framework runs what it links: llm-foundry
and PyTorch's `scaled_dot_product_attention` (torchtitan) run FlashAttention-2, which does not use Hopper's
asynchronous tensor-core (wgmma) and memory (TMA) instructions and reaches about half of FlashAttention-3's
rate there; Megatron-Core with Transformer Engine runs cuDNN's fused attention. On Ampere FlashAttention-2
is what the engines' tables timed already (a100_* blocks), so only Hopper needs these blocks.

The data: the FlashAttention-3 paper's H100 benchmark (Shah, Bikshandi, Zhang, Thakkar, Ramani, Dao,
"FlashAttention-3: Fast and Accurate Attention with Asynchrony and Low-precision", 2024, arXiv:2407.08608,
figure "Attention forward speed, head dim 128 (H100 80GB SXM5)"), TFLOP/s at sequence lengths 512 to 16k
for FlashAttention-2, cuDNN and FlashAttention-3. Each series is reduced to the form of the engines'
prefill-attention curve (ccost.model.kernels): R(S) = R_peak·η_a·S/(S + S½), least squares on log(R/measured).
The FlashAttention-3 series is fitted too, as a check against the vLLM table's FA3 curve (`h100_vllm`): the
two plateaus agree when the chart and the table measure the same thing.

Prints each series' η_a (share of the H100's 989.4 TFLOP/s BF16 dense peak), S½, each point's fitted/measured
and the values as std/gpus.ccost writes them. The H200 is the same GH100 die (132 SMs, same clocks and
BF16 peak): attention is compute-bound, so its blocks take the H100's values.
"""

from __future__ import annotations

import sys

import numpy as np

#: H100 SXM5 BF16 dense peak, FLOP/s (std/gpus.ccost `h100`)
PEAK = 989.4e12
SEQ = (512, 1024, 2048, 4096, 8192, 16384)
#: TFLOP/s, forward, head dim 128, H100 80GB SXM5 (the FlashAttention-3 paper's figure)
SERIES = {
    "flash-attn 2": (191, 260, 298, 319, 333, 335),
    "cudnn": (315, 410, 484, 518, 529, 539),
    "flash-attn 3 (check)": (292, 423, 521, 579, 602, 616),
}


def fit(seq, tflops) -> tuple[float, float]:
    """(η_a, S½) minimising Σ log(R(S)/measured)²: Gauss-Newton on (log R_max, log S½)."""
    s, y = np.asarray(seq, float), np.log(np.asarray(tflops, float) * 1e12)
    p = np.array([np.log(max(tflops) * 1e12), np.log(float(seq[0]))])
    for _ in range(100):
        r = p[0] + np.log(s) - np.log(s + np.exp(p[1])) - y
        J = np.stack([np.ones_like(s), -np.exp(p[1]) / (s + np.exp(p[1]))], axis=1)
        step = np.linalg.lstsq(J, -r, rcond=None)[0]
        p = p + step
        if np.max(np.abs(step)) < 1e-12:
            break
    return float(np.exp(p[0]) / PEAK), float(np.exp(p[1]))


def main() -> int:
    for name, values in SERIES.items():
        eta, half = fit(SEQ, values)
        pred = [PEAK * eta * s / (s + half) / 1e12 for s in SEQ]
        print(f"{name:22} eta_a {eta * 100:5.1f} %  S_half {half:6.0f}  fitted/measured "
              + " ".join(f"{p / m:.3f}" for p, m in zip(pred, values)))
        if "check" not in name:
            print(f"{'':22} std/gpus.ccost: prefill_attention_efficiency = {eta * 100:.1f} %; "
                  f"prefill_attention_half_tokens = {half:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
