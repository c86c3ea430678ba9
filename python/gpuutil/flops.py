"""FLOPs per training step, for MFU and HFU (docs/mfu.md, "FLOPs per step").

Three sources, in order of preference:

1. your own number: ``gpuutil.profile(flops_per_step=...)``;
2. analytic helpers for dense decoder-only transformers:
   :func:`transformer_flops_per_token` / :func:`transformer_flops_per_step`
   (``6·N`` per token plus the attention term ``12·L·T·d``, the PaLM /
   nanoGPT / torchtitan convention);
3. measurement: :func:`measure_flops` runs one step under
   ``torch.utils.flop_counter.FlopCounterMode`` (paid once, on one sampled
   step; torch is imported only here).

:func:`mfu` and :func:`hfu` turn FLOPs, wall time and a peak into the ratios.
MFU counts the model's FLOPs; HFU counts what the hardware executed,
including activation recomputation (``recompute="full"``: one more forward).
"""

from __future__ import annotations

from typing import Any, Callable, Optional

_RECOMPUTE = {None: 0.0, "none": 0.0, "full": 1.0}


def transformer_flops_per_token(
    n_params: float,
    *,
    n_layers: int,
    seq_len: int,
    d_model: int,
    causal_halving: bool = False,
) -> float:
    """Model FLOPs per token of one training step (forward + backward).

    ``6·n_params + 12·n_layers·seq_len·d_model``: 2 FLOPs per parameter per
    token forward and 4 backward, plus the attention score and value matmuls
    (``QK^T`` and ``AV``: ``2·2·T·d`` per layer per token forward, ×3 with
    backward). This is PaLM's appendix B formula, nanoGPT's
    ``estimate_mfu`` and torchtitan's ``get_num_flop_per_token``. Pass
    ``n_params`` *without* the embedding table (torchtitan and PaLM exclude
    it; nanoGPT excludes position embeddings only). ``causal_halving=True``
    halves the attention term for causal masks (FlashAttention's and
    Megatron's convention); the default follows PaLM/nanoGPT/torchtitan.
    """
    for name, v in (("n_params", n_params), ("n_layers", n_layers), ("seq_len", seq_len), ("d_model", d_model)):
        if v <= 0:
            raise ValueError(f"{name} must be positive, not {v!r}")
    attention = 12.0 * n_layers * seq_len * d_model
    if causal_halving:
        attention /= 2.0
    return 6.0 * n_params + attention


def transformer_flops_per_step(
    n_params: float,
    *,
    tokens_per_step: int,
    n_layers: int,
    seq_len: int,
    d_model: int,
    recompute: Optional[str] = None,
    causal_halving: bool = False,
) -> "tuple[float, float]":
    """(model FLOPs, hardware FLOPs) of one step over ``tokens_per_step`` tokens.

    Model FLOPs are for MFU. Hardware FLOPs add recomputation: with
    ``recompute="full"`` (activation checkpointing of every layer) the
    forward runs twice, so hardware = model × 4/3 (8·N instead of 6·N).
    """
    if recompute not in _RECOMPUTE:
        raise ValueError(f"recompute must be one of {sorted(k for k in _RECOMPUTE if k)} or None")
    per_token = transformer_flops_per_token(
        n_params, n_layers=n_layers, seq_len=seq_len, d_model=d_model, causal_halving=causal_halving
    )
    model = per_token * tokens_per_step
    hardware = model * (1.0 + _RECOMPUTE[recompute] / 3.0)
    return model, hardware


def measure_flops(step: Callable[[], Any]) -> float:
    """Runs ``step()`` once under FlopCounterMode and returns its FLOPs.

    Counts what PyTorch has FLOP formulas for (matmuls, convolutions,
    attention): the dominant terms of most models; elementwise ops count as
    zero. The step really runs (it updates the model if it steps the
    optimizer), so use it on a sampled step, once.
    """
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        step()
    return float(counter.get_total_flops())


def mfu(flops: float, wall_s: float, peak_flops_per_s: float) -> Optional[float]:
    """Model FLOPs utilisation: flops / (wall_s × peak); None when undefined."""
    if wall_s <= 0 or peak_flops_per_s <= 0:
        return None
    return flops / (wall_s * peak_flops_per_s)


def hfu(hardware_flops: float, wall_s: float, peak_flops_per_s: float) -> Optional[float]:
    """Hardware FLOPs utilisation (recomputation included); None when undefined."""
    return mfu(hardware_flops, wall_s, peak_flops_per_s)
