"""The value every attack in this package returns."""
from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp


class AttackResult(NamedTuple):
  """Outcome of an attack on a batch, one entry per sample.

  Attributes:
    x_adv: the adversarial inputs, shape [batch, ...] and dtype of x, inside the attack's budget around x
      and inside the pixel bounds. Where an attack failed it holds the attack's last (PGD, MIM, FGSM) or
      highest-loss (APGD) point, or x itself (CW-L2).
    success: bool with shape [batch]; the model's prediction at x_adv differs from the label
      (untargeted) or equals the target (targeted). Evaluated by one forward pass at x_adv, so it is
      consistent with x_adv by construction. Samples already wrong before the attack count as successes
      here; `attack_success_rate` chooses how to count them.
    zero_grad: bool with shape [batch]; the input gradient of the attack objective was exactly zero at
      the attack's starting point (x, or the random start), as AutoAttack's `check_zero_gradients` checks.
      Such samples got no signal from the attack: report them, do not read them as robust.
  """
  x_adv: jnp.ndarray
  success: jnp.ndarray
  zero_grad: jnp.ndarray
