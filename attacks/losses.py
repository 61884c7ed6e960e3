"""Attack objectives computed from logits, one value per sample.

All losses take logits (never probabilities: a softmax followed by a log underflows, and AutoAttack warns
when a model returns probabilities) and return shape [batch]; reduce explicitly. Objectives are written
to be *maximised* by the attacker.
"""
from __future__ import annotations

from typing import Literal

import jax
import jax.numpy as jnp

from attacks import chunking

Loss = Literal["ce", "dlr"]
LOSSES = ("ce", "dlr")


def _is_label(logits_BxK, labels_B):
  return jax.nn.one_hot(labels_B, logits_BxK.shape[-1], dtype=jnp.bool_)


def _label_logit(logits_BxK, labels_B):
  # A masked sum rather than take_along_axis: its gradient is dense, not a scatter (a loop on CPU).
  return jnp.sum(jnp.where(_is_label(logits_BxK, labels_B), logits_BxK, 0.0), axis=-1)


def cross_entropy(logits_BxK: jnp.ndarray, labels_B: jnp.ndarray) -> jnp.ndarray:
  """Per-sample cross-entropy −log softmax(z)_y = logsumexp(z) − z_y: the value and gradient of optax's
  ``softmax_cross_entropy_with_integer_labels``, bit for bit, without its ``take_along_axis``, whose
  gradient is a scatter-add that XLA:CPU runs as a loop over the batch, one sample per iteration
  (benchmarks/attacks_pgd_breakdown.py and README, "Performance").

  The code base's one cross-entropy: the attacks, ``experiments.trainers.classifier`` and
  ``ntk.training.softmax_cross_entropy`` all call it and reduce it themselves, as optax's losses are
  reduced by their callers.

  Args:
    logits_BxK: logits with shape [batch, classes].
    labels_B: integer labels with shape [batch], in [0, classes).

  Returns:
    Float array with shape [batch], ≥ 0 (nats).
  """
  return jax.nn.logsumexp(logits_BxK, axis=-1) - _label_logit(logits_BxK, labels_B)


def best_other_logit(logits_BxK: jnp.ndarray, labels_B: jnp.ndarray) -> jnp.ndarray:
  """max_{i≠y} z_i per sample; the label's logit is masked with −inf, never multiplied by zero.

  For logits [−5, −3, −4] and label 0 this is −3 (zeroing the label's entry instead would give 0, a bug
  seen in public CW implementations).

  Args:
    logits_BxK: logits with shape [batch, classes], classes ≥ 2.
    labels_B: integer labels with shape [batch].

  Returns:
    Array with shape [batch].
  """
  return jnp.max(jnp.where(_is_label(logits_BxK, labels_B), -jnp.inf, logits_BxK), axis=-1)


def logit_margin(logits_BxK: jnp.ndarray, labels_B: jnp.ndarray) -> jnp.ndarray:
  """z_y − max_{i≠y} z_i per sample, shape [batch]; negative means misclassified."""
  return _label_logit(logits_BxK, labels_B) - best_other_logit(logits_BxK, labels_B)


def cw_loss(logits_BxK, labels_B, *, target_B=None, confidence: float = 0.0) -> jnp.ndarray:
  """Carlini–Wagner's f₆ term, to be *minimised*; shape [batch], ≥ 0.

  Untargeted: max(Z_y − max_{i≠y} Z_i + κ, 0). Targeted at t: max(max_{i≠t} Z_i − Z_t + κ, 0).
  Source: Carlini & Wagner, "Towards Evaluating the Robustness of Neural Networks" (S&P 2017), §V.A,
  objective f₆ (their best); κ = `confidence` in logit units.
  """
  if target_B is None:
    margin_B = logit_margin(logits_BxK, labels_B)
  else:
    margin_B = -logit_margin(logits_BxK, target_B)
  return jnp.maximum(margin_B + confidence, 0.0)


def dlr_loss(logits_BxK: jnp.ndarray, labels_B: jnp.ndarray) -> jnp.ndarray:
  """Untargeted Difference-of-Logits-Ratio loss, to be maximised; shape [batch].

  DLR(z, y) = −(z_y − max_{i≠y} z_i) / (z_π1 − z_π3 + 1e-12), with π the logits sorted in decreasing
  order. Invariant to shifting and rescaling the logits. Needs ≥ 3 classes (checked by the attacks).
  Source: Croce & Hein, "Reliable evaluation of adversarial robustness with an ensemble of diverse
  parameter-free attacks" (ICML 2020), eq. (6).
  """
  top_Bx3 = jax.lax.top_k(logits_BxK, 3)[0]
  return -logit_margin(logits_BxK, labels_B) / (top_Bx3[:, 0] - top_Bx3[:, 2] + 1e-12)


def dlr_targeted_loss(logits_BxK, labels_B, target_B) -> jnp.ndarray:
  """Targeted DLR, to be maximised; shape [batch]; needs ≥ 4 classes.

  −(z_y − z_t) / (z_π1 − (z_π3 + z_π4)/2 + 1e-12). Source: Croce & Hein (ICML 2020), eq. (7).
  """
  top_Bx4 = jax.lax.top_k(logits_BxK, 4)[0]
  scale_B = top_Bx4[:, 0] - 0.5 * (top_Bx4[:, 2] + top_Bx4[:, 3]) + 1e-12
  return -(_label_logit(logits_BxK, labels_B) - _label_logit(logits_BxK, target_B)) / scale_B


def attack_objective(logits_BxK, labels_B, *, target_B=None, loss: Loss = "ce") -> jnp.ndarray:
  """The per-sample objective an attacker maximises; shape [batch].

  ce: CE(z, y) untargeted, −CE(z, t) targeted (as torchattacks). dlr: `dlr_loss` or `dlr_targeted_loss`.
  """
  if loss == "ce":
    if target_B is None:
      return cross_entropy(logits_BxK, labels_B)
    return -cross_entropy(logits_BxK, target_B)
  if loss == "dlr":
    if target_B is None:
      return dlr_loss(logits_BxK, labels_B)
    return dlr_targeted_loss(logits_BxK, labels_B, target_B)
  raise ValueError(f"loss must be one of {LOSSES}, got {loss!r}")


def is_adversarial(logits_BxK, labels_B, *, target_B=None) -> jnp.ndarray:
  """Success criterion, bool shape [batch]: argmax z ≠ y (untargeted) or argmax z = t (targeted)."""
  pred_B = jnp.argmax(logits_BxK, axis=-1)
  if target_B is None:
    return pred_B != labels_B
  return pred_B == target_B


def objective_and_grad(logits_fn, x, labels_B, *, target_B=None, loss: Loss = "ce", chunk="auto"):
  """Objective, logits and input gradient in one forward and one backward pass.

  The gradient of Σ_i objective_i with respect to x is the per-sample gradient, because logits_fn treats
  samples independently (no batch statistics). On CPU the batch is processed in cache-sized chunks
  (``attacks.chunking``); the values agree with one pass over the whole batch to float32 rounding.

  Args:
    logits_fn: pure function x [batch, ...] -> logits [batch, classes].
    x: inputs with shape [batch, ...].
    labels_B: true labels, shape [batch].
    target_B: target labels for a targeted attack, or None.
    loss: "ce" or "dlr".
    chunk: samples per chunk: "auto" (``chunking.chunk_size``), None (the whole batch) or an integer >= 1.

  Returns:
    (objective [batch], logits [batch, classes], gradient with the shape of x).

  Raises:
    ValueError: chunk is not "auto", None or an integer >= 1.
  """
  chunking.check_chunk(chunk)
  if isinstance(chunk, str):  # "auto" (check_chunk refused any other string)
    chunk = chunking.chunk_size(logits_fn, x)
  if chunk is not None:
    return chunking.map_chunks(
        lambda x_c, labels_c, target_c: objective_and_grad(logits_fn, x_c, labels_c, target_B=target_c,
                                                           loss=loss, chunk=None),
        chunk, x, labels_B, target_B)

  def total(x_adv):
    logits_BxK = logits_fn(x_adv)
    objective_B = attack_objective(logits_BxK, labels_B, target_B=target_B, loss=loss)
    return jnp.sum(objective_B), (objective_B, logits_BxK)

  (_, (objective_B, logits_BxK)), grad = jax.value_and_grad(total, has_aux=True)(x)
  return objective_B, logits_BxK, grad


def all_zero(grad) -> jnp.ndarray:
  """Per-sample test that a gradient with shape [batch, ...] is exactly zero; bool shape [batch]."""
  return jnp.all(grad == 0, axis=tuple(range(1, grad.ndim)))
