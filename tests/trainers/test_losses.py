import math

import pytest
import torch

from trainers._losses import LOSSES, batch_denominator, k3_kl, masked_mean, token_entropy


def test_k3_by_hand():
    logp = torch.tensor([math.log(0.5), math.log(0.25)])
    ref = torch.tensor([math.log(0.25), math.log(0.25)])
    # d = log(0.25/0.5) = -ln 2: exp(d) - d - 1 = 0.5 + 0.693147 - 1 = 0.193147; second token agrees -> 0
    assert torch.allclose(k3_kl(logp, ref), torch.tensor([0.193147, 0.0]), atol=1e-6)


def test_entropy_uniform():
    assert torch.allclose(token_entropy(torch.zeros(2, 4)), torch.full((2,), math.log(4)))


def _batch():
    # two sequences: 2 real tokens + 1 pad, 1 real token + 2 pad
    logp = torch.log(torch.tensor([[0.6, 0.3, 0.9], [0.1, 0.5, 0.5]]))
    old = torch.log(torch.tensor([[0.5, 0.3, 0.1], [0.2, 0.5, 0.5]]))
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    adv = torch.tensor([1.0, -1.0])
    return logp, old, adv, mask


def test_clipped_loss_by_hand():
    logp, old, adv, mask = _batch()
    # ratios: seq0 = [1.2, 1.0], seq1 = [0.5]; clip 0.1 -> seq0 tok0 clipped to 1.1 (A>0),
    # seq1 tok0: max(-(-1)*0.5, -(-1)*0.9) = 0.9 (clamped, A<0 and ratio < 0.9)
    # per-token policy terms: seq0 = [-1.1, -1.0], seq1 = [0.9]
    kw = dict(clip_low=0.1, clip_high=0.1, beta=0.0)
    grpo = LOSSES["grpo"](logp, old, None, adv, mask, **kw)
    assert torch.allclose(grpo.loss, torch.tensor(((-1.1 - 1.0) / 2 + 0.9) / 2))
    dapo = LOSSES["dapo"](logp, old, None, adv, mask, **kw)
    assert torch.allclose(dapo.loss, torch.tensor((-1.1 - 1.0 + 0.9) / 3))
    # Dr. GRPO divides by B * the completion budget (4 here), not by the batch's longest completion (3)
    dr = LOSSES["dr_grpo"](logp, old, None, adv, mask, max_tokens=4, **kw)
    assert torch.allclose(dr.loss, torch.tensor((-1.1 - 1.0 + 0.9) / 8))
    with pytest.raises(ValueError, match="max_tokens"):
        LOSSES["dr_grpo"](logp, old, None, adv, mask, **kw)
    # two of the three real tokens were clipped; the pad (ratio 9) is ignored
    assert torch.allclose(grpo.clip_fraction, torch.tensor(2 / 3))
    assert grpo.kl.item() == 0.0


def test_kl_term_and_gradient_only_on_unclipped_tokens():
    logp, old, adv, mask = _batch()
    logp = logp.clone().requires_grad_(True)
    ref = old.clone()
    terms = LOSSES["dapo"](logp, old, ref, adv, mask, clip_low=0.1, clip_high=0.1, beta=0.5)
    kl = k3_kl(logp.detach(), ref)
    expected_kl = (kl * mask).sum() / 3
    assert torch.allclose(terms.kl, expected_kl)
    assert torch.allclose(terms.loss, torch.tensor((-1.1 - 1.0 + 0.9) / 3) + 0.5 * expected_kl)
    terms.loss.backward()
    # padded positions get no gradient; the clipped token only gets the KL gradient
    assert logp.grad[0, 2] == 0 and logp.grad[1, 1] == 0 and logp.grad[1, 2] == 0
    kl_grad_tok0 = 0.5 * (1 - torch.exp(ref[0, 0] - logp[0, 0].detach())) / 3
    assert torch.allclose(logp.grad[0, 0], kl_grad_tok0, atol=1e-6)
    # unclipped token 1 of seq 0: d/dlogp(-A * ratio) = -1 * ratio(=1) / 3, KL is 0 there
    assert torch.allclose(logp.grad[0, 1], torch.tensor(-1 / 3), atol=1e-6)


def test_masked_mean_empty_mask():
    assert masked_mean(torch.ones(2, 2), torch.zeros(2, 2)).item() == 0.0


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_micro_batches_sum_to_the_whole_batch_loss(name):
    # grad_accum: each chunk divides by the whole batch's denominator and the chunk losses add up
    # to the one-batch loss (a mean of per-chunk means would weigh a short chunk's tokens more)
    torch.manual_seed(0)
    logp, old = torch.randn(5, 6) * 0.1, torch.randn(5, 6) * 0.1
    adv = torch.tensor([1.0, -0.5, 0.0, 2.0, -1.0])
    mask = torch.tensor([[1] * 6, [1] * 1 + [0] * 5, [1] * 3 + [0] * 3, [1] * 2 + [0] * 4, [1] * 5 + [0]]).float()
    kw = dict(clip_low=0.2, clip_high=0.2, beta=0.1, max_tokens=8)
    whole = LOSSES[name](logp, old, old, adv, mask, **kw).loss
    denom = batch_denominator(name, mask, max_tokens=8)
    parts = [
        LOSSES[name](logp[i], old[i], old[i], adv[i], mask[i], denominator=denom, **kw).loss
        for i in (slice(0, 1), slice(1, 5))
    ]
    assert torch.allclose(sum(parts), whole, atol=1e-6)
