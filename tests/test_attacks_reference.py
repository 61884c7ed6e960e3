"""FGSM and PGD (no random start) agree with torchattacks 3.5.1 on the same MLP and weights.

The fixture was frozen by `scripts/torchattacks_crosscheck.py` in a separate PyTorch environment;
PyTorch is not a dependency of this project. Provenance: tests/fixtures/attacks/torchattacks_reference.json.
"""
import json
import pathlib

import jax.numpy as jnp
import numpy as np
import pytest

from attacks import fgsm, pgd_linf

FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "attacks"
TORCHATTACKS_FIXTURE = np.load(FIXTURES / "torchattacks_reference.npz")
PROVENANCE = json.loads((FIXTURES / "torchattacks_reference.json").read_text())


def mlp(x):
  """The fixture's MLP in JAX: Flatten -> Linear -> ReLU -> Linear, weights stored [in, out]."""
  hidden = jnp.maximum(x.reshape(x.shape[0], -1) @ TORCHATTACKS_FIXTURE["w1"] + TORCHATTACKS_FIXTURE["b1"][None, :], 0.0)
  return hidden @ TORCHATTACKS_FIXTURE["w2"] + TORCHATTACKS_FIXTURE["b2"][None, :]


def test_provenance_names_the_reference():
  assert PROVENANCE["versions"]["torchattacks"] == "3.5.1"
  assert PROVENANCE["versions"]["torch"].startswith("2.13.0")
  assert {"seed", "model", "command", "cases"} <= set(PROVENANCE)


@pytest.mark.parametrize("case", sorted(PROVENANCE["cases"]))
def test_agrees_with_torchattacks(case):
  spec = PROVENANCE["cases"][case]
  settings = {k: spec[k] for k in ("eps", "alpha", "steps", "random_start") if k in spec}
  targeted = dict(targeted=True, target=TORCHATTACKS_FIXTURE["target"]) if spec["targeted"] else {}
  attack = {"torchattacks.FGSM": fgsm, "torchattacks.PGD": pgd_linf}[spec["attack"]]
  result = attack(mlp, TORCHATTACKS_FIXTURE["x"], TORCHATTACKS_FIXTURE["y"], **settings, **targeted)
  expected = TORCHATTACKS_FIXTURE[spec["npz_key"]]
  assert result.x_adv.shape == expected.shape
  # torchattacks' CE is batch-mean reduced; sign(∇) is unchanged, so the outputs agree to rounding.
  np.testing.assert_allclose(np.asarray(result.x_adv), expected, rtol=0, atol=1e-6)
  assert not np.array_equal(expected, TORCHATTACKS_FIXTURE["x"])  # the reference moved: not a vacuous check
