"""Local bounds of captured layers (attention.layer_bounds): on a foreign Flax transformer (biases on, tokens
augmented) and on our ViT, every bound is at least the deviation PGD finds, and at small ε the attack
attains the layer's Jacobian norm (the first-order term of the joint bound)."""
import jax
import numpy as np
import pytest
from test_capture import VIT_TINY, _images, foreign_model, init_jiggled

from attention.capture import capture_attention
from attention.layer_bounds import BOUND_KINDS, layer_bound_check
from attention.vit import VisionTransformer

EPS = (1e-3, 0.1, 0.5, 2.0)
ROUNDING = 1e-4   # relative float32 allowance between a bound and an attack at the same point


def _captured(name):
  if name == "foreign":
    model, params, x = foreign_model()
  else:
    model = VisionTransformer(VIT_TINY)
    x = _images(2)
    params = init_jiggled(model, x, 7, scale=0.2)
  return capture_attention(lambda p, v: model.apply({"params": p}, v), params, x)


@pytest.mark.long
@pytest.mark.parametrize("name", ["foreign", "vit"])
def test_every_bound_is_above_its_attack(name):
  cap = _captured(name)
  assert len(cap.layers) == 2
  for i, layer in enumerate(cap.layers):
    check = layer_bound_check(layer, EPS, key=jax.random.key(i), max_samples=2, power_iters=40, pgd_steps=40,
                              pgd_restarts=2)
    assert check.deviation.shape == (2, len(EPS)) and set(check.bounds) == set(BOUND_KINDS)
    assert np.all(check.deviation > 0)
    for kind in BOUND_KINDS:
      assert np.all(check.deviation <= check.bounds[kind] * (1 + ROUNDING)), (layer.path, kind)
    assert np.all(check.bounds["min"] <= check.bounds["fine"]) and np.all(check.bounds["min"] <= check.bounds["joint"])
    # First order: at small ε the deviation is ‖∂G/∂X‖ε (+ O(ε²)), and the Jacobian estimate at X̃ bounds
    # the one at X; without augmentation they are the same operator, so the attack meets it.
    slope = check.deviation[:, 0] / EPS[0]
    assert np.all(slope <= check.jacobian_norm * (1 + 2e-3))
    if not layer.augmented:
      np.testing.assert_allclose(slope, check.jacobian_norm, rtol=2e-3)


def test_bound_refuses_layers_it_does_not_cover():
  model, params, x = foreign_model("normalize_qk")
  layer = capture_attention(lambda p, v: model.apply({"params": p}, v), params, x).layers[1]
  with pytest.raises(ValueError, match="normalize_qk"):
    layer_bound_check(layer, 0.1, key=jax.random.key(0))
  good = capture_attention(lambda p, v: model.apply({"params": p}, v), params, x).layers[0]
  for kwargs, match in ((dict(eps=-1.0), "eps"), (dict(eps=[[0.1]]), "eps"), (dict(eps=0.1, max_samples=0),
                                                                              "max_samples")):
    with pytest.raises(ValueError, match=match):
      layer_bound_check(good, key=jax.random.key(0), **kwargs)
