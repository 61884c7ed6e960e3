"""Adversarial attacks as compiled pure functions of a model's logits function.

Every attack has the shape

  attack(logits_fn, x, y, *, eps, key=None, targeted=False, target=None, ...) -> AttackResult

with `logits_fn(x) -> [batch, classes]` pure and model-agnostic, x [batch, ...] in [0, 1] (or `bounds`),
y integer labels [batch] and ε on the pixel scale. The whole loop runs under jit (lax loops); norms,
projections, momentum, step sizes and early stopping are per sample; random starts use fold_in(key, i)
for sample i; batches are sharded over local devices. On CPU the input gradients are computed in
cache-sized chunks of the batch (``attacks.chunking``), which needs sample i's logits to depend on x[i]
alone; a logits_fn that also reads its row's position (its one-sample trace does not return one row) keeps
the whole batch. Semantics: docs/theory.md#attack-conventions.
"""
from attacks import presets
from attacks.apgd import apgd, checkpoint_schedule
from attacks.cw import cw_l2
from attacks.fgsm import fgm_l2, fgsm
from attacks.losses import (
    attack_objective,
    best_other_logit,
    cross_entropy,
    cw_loss,
    dlr_loss,
    dlr_targeted_loss,
    is_adversarial,
    logit_margin,
)
from attacks.metrics import SuccessRate, attack_success_rate, success_within_l2
from attacks.mim import mim
from attacks.over_models import over_models
from attacks.patch import patch
from attacks.projected_gradient import pgd, pgd_l2, pgd_linf
from attacks.projections import BUDGET_RTOL, within_budget
from attacks.result import AttackResult

__all__ = [
    "AttackResult",
    "BUDGET_RTOL",
    "SuccessRate",
    "apgd",
    "attack_objective",
    "attack_success_rate",
    "best_other_logit",
    "checkpoint_schedule",
    "cross_entropy",
    "cw_l2",
    "cw_loss",
    "dlr_loss",
    "dlr_targeted_loss",
    "fgm_l2",
    "fgsm",
    "is_adversarial",
    "logit_margin",
    "mim",
    "over_models",
    "patch",
    "pgd",
    "pgd_l2",
    "pgd_linf",
    "presets",
    "success_within_l2",
    "within_budget",
]
