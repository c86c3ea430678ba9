"""FLOPs per step: the analytic transformer helpers match the published
conventions, measurement with FlopCounterMode matches a hand count, and
MFU/HFU are the defined ratios."""

from __future__ import annotations

import pytest

from gpuutil import flops


def test_transformer_flops_match_nanogpt_estimate_for_gpt2_small():
    # nanoGPT estimate_mfu: N=124M (non-embedding params here), L=12, H*Q=768, T=1024:
    # flops_per_token = 6N + 12*L*H*Q*T.
    n, layers, d, t = 85e6, 12, 768, 1024
    assert flops.transformer_flops_per_token(n, n_layers=layers, seq_len=t, d_model=d) == 6 * n + 12 * layers * d * t


def test_causal_halving_halves_only_the_attention_term():
    full = flops.transformer_flops_per_token(1e9, n_layers=24, seq_len=2048, d_model=2048)
    half = flops.transformer_flops_per_token(1e9, n_layers=24, seq_len=2048, d_model=2048, causal_halving=True)
    assert full - half == pytest.approx(6 * 24 * 2048 * 2048)


def test_full_recompute_makes_hardware_flops_eight_n_per_token_without_attention():
    model, hardware = flops.transformer_flops_per_step(1e9, tokens_per_step=1000, n_layers=1, seq_len=1, d_model=1,
                                                        recompute="full")
    assert model == pytest.approx(1000 * (6e9 + 12))
    assert hardware == pytest.approx(model * 4 / 3)
    model2, hardware2 = flops.transformer_flops_per_step(1e9, tokens_per_step=1000, n_layers=1, seq_len=1, d_model=1)
    assert model2 == hardware2 == model


def test_invalid_arguments_are_rejected():
    with pytest.raises(ValueError):
        flops.transformer_flops_per_token(0, n_layers=1, seq_len=1, d_model=1)
    with pytest.raises(ValueError):
        flops.transformer_flops_per_step(1, tokens_per_step=1, n_layers=1, seq_len=1, d_model=1, recompute="some")


def test_measure_flops_counts_a_linear_training_step():
    torch = pytest.importorskip("torch")
    lin = torch.nn.Linear(64, 32, bias=False)
    x = torch.randn(16, 64)

    def step():
        lin(x).sum().backward()

    # forward 2*B*I*O; backward only grad-weight (x needs no grad): 1 more matmul.
    assert flops.measure_flops(step) == 2 * 2 * 16 * 64 * 32
    x.requires_grad_(True)
    # ... and with grad-input too: 3 matmuls.
    assert flops.measure_flops(step) == 3 * 2 * 16 * 64 * 32


def test_mfu_and_hfu_are_ratios_to_wall_times_peak():
    assert flops.mfu(1e12, 0.5, 4e12) == pytest.approx(0.5)
    assert flops.hfu(2e12, 1.0, 4e12) == pytest.approx(0.5)
    assert flops.mfu(1e12, 0.0, 4e12) is None
