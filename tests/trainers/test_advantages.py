import math

import pytest
import torch

from trainers._advantages import ADVANTAGES, group_normalized, leave_one_out, zero_variance_groups


def test_group_normalized_by_hand():
    r = torch.tensor([[1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0]])
    adv = group_normalized(r, eps=0.0 + 1e-12)
    # row 0: mean 0.5, unbiased std sqrt(4 * 0.25 / 3) = 0.57735
    s = math.sqrt(1 / 3)
    assert torch.allclose(adv[0], torch.tensor([0.5 / s, -0.5 / s, -0.5 / s, 0.5 / s]), atol=1e-6)
    # row 1: all equal -> exactly zero
    assert torch.equal(adv[1], torch.zeros(4))


def test_group_normalized_eps_bounds_small_std():
    r = torch.tensor([[0.0, 1.0]])
    adv = group_normalized(r, eps=1.0)
    # std = sqrt(0.5) = 0.7071; (1 - 0.5) / (0.7071 + 1) = 0.29289
    assert torch.allclose(adv, torch.tensor([[-0.29289, 0.29289]]), atol=1e-5)


def test_leave_one_out_by_hand():
    r = torch.tensor([[1.0, 0.0, 0.0]])
    # 1 - mean(0, 0) = 1; 0 - mean(1, 0) = -0.5
    assert torch.allclose(leave_one_out(r), torch.tensor([[1.0, -0.5, -0.5]]))
    with pytest.raises(ValueError, match="group size >= 2"):
        leave_one_out(torch.tensor([[1.0]]))


def test_zero_variance_groups_and_registry():
    r = torch.tensor([[0.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
    assert zero_variance_groups(r).tolist() == [True, True, False]
    assert set(ADVANTAGES) == {"group_norm", "leave_one_out"}
    with pytest.raises(ValueError, match="expected rewards of shape"):
        group_normalized(torch.zeros(4))
