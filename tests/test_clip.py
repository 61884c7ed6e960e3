"""attention.clip: the contrastive loss is CLIP's formula and symmetric, padding never changes a prompt's
embedding, zero-shot picks the nearest class embedding, CLIP and DiffCLIP differ only by the differential
layers' own parameters, and the tokenizer pads, truncates and maps unknown words as documented."""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attention.clip import (CLIP, CLIPConfig, WordTokenizer, class_embeddings, contrastive_loss,
                            zero_shot_logits)
from attention.vit import ViTConfig

PROMPTS = ["a photo of a cat.", "a blurry photo of a dog.", "an image of a ship"]
TOK = WordTokenizer.from_texts(PROMPTS)


def _config(attention="standard"):
  return CLIPConfig(ViTConfig(image_size=8, patch_size=4, dim=16, depth=1, num_heads=4, attention=attention,
                              lambda_init=0.8 if attention == "differential" else None),
                    vocab_size=TOK.vocab_size, max_length=8, text_dim=16, text_depth=2, text_heads=4, embed_dim=8)


def _unit(v):
  return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_contrastive_loss_is_clips_formula_and_symmetric():
  rng = np.random.default_rng(0)
  img, txt = _unit(rng.normal(size=(5, 8))), _unit(rng.normal(size=(5, 8)))
  t = 1.3
  logits = np.exp(t) * img @ txt.T
  ce = lambda z: np.mean(np.log(np.exp(z).sum(1)) - np.diag(z))  # noqa: E731
  want = 0.5 * (ce(logits) + ce(logits.T))
  got = float(contrastive_loss(jnp.asarray(img), jnp.asarray(txt), t))
  assert got == pytest.approx(want, rel=1e-5)
  assert float(contrastive_loss(jnp.asarray(txt), jnp.asarray(img), t)) == pytest.approx(got, rel=1e-5)
  perm = rng.permutation(5)
  assert float(contrastive_loss(jnp.asarray(img[perm]), jnp.asarray(txt[perm]), t)) == pytest.approx(got, rel=1e-5)
  aligned = float(contrastive_loss(jnp.eye(5, 8), jnp.eye(5, 8), 5.0))    # orthonormal pairs, sharp temperature
  assert aligned < 0.01 < got


@pytest.mark.parametrize("attention", ["standard", "differential"])
def test_padding_never_changes_a_prompts_embedding(attention):
  model = CLIP(_config(attention))
  ids, mask = TOK.encode(PROMPTS, 8)
  x = jnp.full((3, 8, 8, 3), 0.5)
  params = model.init(jax.random.PRNGKey(0), x, jnp.asarray(ids), jnp.asarray(mask))
  text = model.apply(params, jnp.asarray(ids), jnp.asarray(mask), method=CLIP.encode_text)
  noisy = np.where(mask, ids, np.random.default_rng(1).integers(0, TOK.vocab_size, ids.shape))
  again = model.apply(params, jnp.asarray(noisy), jnp.asarray(mask), method=CLIP.encode_text)
  np.testing.assert_allclose(again, text, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(np.linalg.norm(np.asarray(text), axis=1), 1.0, rtol=1e-5)


def test_clip_and_diffclip_differ_only_by_the_differential_parameters():
  count = {}
  for attention in ("standard", "differential"):
    model = CLIP(_config(attention))
    ids, mask = TOK.encode(PROMPTS, 8)
    params = model.init(jax.random.PRNGKey(0), jnp.zeros((1, 8, 8, 3)), jnp.asarray(ids[:1]), jnp.asarray(mask[:1]))
    count[attention] = sum(np.size(v) for v in jax.tree_util.tree_leaves(params))
  head_dim, layers = 16 // 4, 1 + 2          # image depth 1, text depth 2
  assert count["differential"] - count["standard"] == 6 * head_dim * layers   # λ_q1, λ_k1, λ_q2, λ_k2 and the 2d gain


def test_zero_shot_picks_the_nearest_class_embedding():
  prompts = _unit(np.random.default_rng(2).normal(size=(4 * 3, 8))).reshape(4, 3, 8)   # 4 classes × 3 templates
  classes = np.asarray(class_embeddings(jnp.asarray(prompts)))
  np.testing.assert_allclose(classes, _unit(prompts.mean(1)), rtol=1e-5)
  images = _unit(classes[[2, 0, 3]] + 0.05 * np.random.default_rng(3).normal(size=(3, 8)))
  assert np.argmax(np.asarray(zero_shot_logits(jnp.asarray(images), jnp.asarray(classes), 1.0)), 1).tolist() == [2, 0, 3]


def test_tokenizer_pads_truncates_and_maps_unknown_words():
  ids, mask = TOK.encode(["A photo of a CAT!", "zebra photo"], 4)
  words = TOK.words
  assert [words[i] for i in ids[0]] == ["a", "photo", "of", "a"] and mask[0].all()        # truncated to 4
  assert ids[1].tolist() == [1, TOK.ids["photo"], 0, 0] and mask[1].tolist() == [True, True, False, False]
  with pytest.raises(ValueError, match="has no words"):
    TOK.encode(["  "], 4)
  with pytest.raises(ValueError, match="vocab_size"):
    dataclasses.replace(_config(), vocab_size=2).validate()


def test_prompt_tables_and_zero_shot_models_refuse_what_would_train_silently_wrong():
  from attention.clip import ZeroShotCLIP, prompt_table
  tok = WordTokenizer.from_texts(["a photo of a cat.", "a photo of a dog."])
  with pytest.raises(ValueError, match="at least one template"):
    prompt_table(tok, ["cat"], [], 6)
  for bad in ("a {} {name}", "a }{} {", "no placeholder", "{} and {}"):
    with pytest.raises(ValueError, match="one '\\{\\}'"):
      prompt_table(tok, ["cat"], [bad], 6)
  with pytest.raises(ValueError, match="does not know.*zebra"):
    prompt_table(tok, ["cat", "zebra"], ["a photo of a {}."], 6)
  with pytest.raises(ValueError, match="case-insensitively"):
    prompt_table(tok, ["cat", "Cat"], ["a photo of a {}."], 6)
  with pytest.raises(ValueError, match="single string"):
    tok.encode("a cat", 4)
  assert WordTokenizer(["Cat"]).encode(["cat"], 2)[0].tolist() == [[2, 0]]  # the vocabulary is lower-cased too
  table = prompt_table(TOK, ["cat", "dog"], ["a photo of a {}."], 8)
  x = jnp.zeros((1, 8, 8, 3))
  for prompts, match in ((table[0], "shape"), ((((0,) * 6,),), "max_length"), ((((99,) * 8,),), "vocab_size")):
    with pytest.raises(ValueError, match=match):
      ZeroShotCLIP(_config(), prompts).init(jax.random.key(0), x)


def test_zero_shot_logits_against_precomputed_classes_equal_the_full_call():
  from attention.clip import ZeroShotCLIP, prompt_table
  model = ZeroShotCLIP(_config(), prompt_table(TOK, ["cat", "dog"], ["a photo of a {}.", "an image of a {}"], 8))
  x = jax.random.uniform(jax.random.key(1), (3, 8, 8, 3))
  params = model.init(jax.random.key(0), x)["params"]
  classes = model.apply({"params": params}, method=ZeroShotCLIP.class_embeddings)
  np.testing.assert_allclose(np.asarray(model.apply({"params": params}, x, classes, method=ZeroShotCLIP.logits_against)),
                             np.asarray(model.apply({"params": params}, x)), rtol=1e-6, atol=1e-6)


# --- Mutation-targeted tests: formulas pinned in full (not through an argmax), the pooling and projection
# with parameters whose biases are not zero (at init a bias of 0 hides a dropped or wrong normalisation behind
# the final unit-length division), and the boundaries of the checks. ---

def _random_params(model, *init_args, seed=0):
  """Parameters of the model's shapes drawn N(0, 0.5²) (no zero biases, no unit LayerNorm gains), built from
  jax.eval_shape so that no initialiser is compiled."""
  shapes = jax.eval_shape(model.init, jax.random.key(0), *init_args)
  rng = np.random.default_rng(seed)
  return jax.tree_util.tree_map(lambda s: jnp.asarray((0.5 * rng.normal(size=s.shape)).astype(s.dtype)), shapes)


def test_zero_shot_logits_are_exp_t_times_the_cosines_and_a_zero_class_mean_stays_finite():
  """Catches zero-shot logits scaled by t instead of exp(t), or transposed (the test above reads only their
  argmax at t = 1): exp(t)·I Cᵀ written out, at t = −0.7 and 2; and a class whose prompt embeddings cancel
  gets the zero vector, not NaN (the unit normalisation's guard)."""
  rng = np.random.default_rng(4)
  images, classes = _unit(rng.normal(size=(3, 8))), _unit(rng.normal(size=(5, 8)))
  for t in (-0.7, 2.0):
    got = np.asarray(zero_shot_logits(jnp.asarray(images, jnp.float32), jnp.asarray(classes, jnp.float32), t))
    np.testing.assert_allclose(got, np.exp(t) * images @ classes.T, rtol=1e-5, atol=1e-6)
  v = _unit(rng.normal(size=(1, 8)))
  prompts = np.stack([np.concatenate([v, -v]), np.concatenate([v, v])])  # class 0 cancels, class 1 is v
  got = np.asarray(class_embeddings(jnp.asarray(prompts, jnp.float32)))
  assert np.all(np.isfinite(got)) and np.all(got[0] == 0)
  np.testing.assert_allclose(got[1], v[0], rtol=1e-6)


def test_text_embedding_is_the_unit_projection_of_the_mean_over_the_real_tokens():
  """Catches the pooling divided by the padded length, summed, or taken over padding too, and the projection
  bias dropped — all invisible at init, where the bias is 0 and the unit normalisation removes any scale: with
  random parameters, the embedding of prompts of 5, 6 and 7 words padded to 8 equals
  unit((Σ_real h_l / #real) W + b) over the final LayerNorm's output h, written out in float64."""
  model = CLIP(_config())
  ids, mask = TOK.encode(PROMPTS, 8)
  assert sorted(mask.sum(axis=1).tolist()) == [5, 6, 7]
  params = _random_params(model, jnp.zeros((1, 8, 8, 3)), jnp.asarray(ids), jnp.asarray(mask))
  encode = jax.jit(lambda p, i, m: model.apply(p, i, m, method=CLIP.encode_text, capture_intermediates=True))
  text, state = encode(params, jnp.asarray(ids), jnp.asarray(mask))
  h = np.asarray(state["intermediates"]["text"]["final_norm"]["__call__"][0], np.float64)
  proj = params["params"]["text"]["projection"]
  pooled = (h * mask[..., None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
  np.testing.assert_allclose(np.asarray(text), _unit(pooled @ np.asarray(proj["kernel"]) + np.asarray(proj["bias"])),
                             rtol=1e-5, atol=1e-6)


def test_zero_shot_clip_averages_each_classes_templates_and_pairs_each_image_with_its_caption():
  """Catches the class × template table read in the wrong order (3 classes, 2 templates), the class mean
  taken over the wrong axis or not renormalised, padding counted in a prompt, and a contrastive batch paired
  with the wrong captions or scored against the wrong labels. The towers (tested above) are replaced by
  closed forms, so that ZeroShotCLIP's own code is what is compiled and checked: an image is its first 8
  pixels made unit length, a prompt unit(Σ_real tokens E[token]) for a fixed random table E. Then the class
  embeddings are unit(mean over the class's templates) of those, the logits exp(t)·I Cᵀ, the contrastive
  loss CLIP's formula on the images and the captions of template template_B[b] of class y_B[b], and the
  accuracy that of the zero-shot argmax — all written out in numpy."""
  from attention.clip import ZeroShotCLIP, prompt_table
  table_VxE = np.random.default_rng(7).normal(size=(TOK.vocab_size, 8)).astype(np.float32)

  class ClosedFormTowers(ZeroShotCLIP):
    def encode_image(self, x_BxHxWxC, train: bool = False):
      v = x_BxHxWxC.reshape(x_BxHxWxC.shape[0], -1)[:, :8]
      return v / jnp.linalg.norm(v, axis=1, keepdims=True)

    def encode_text(self, tokens_BxL, mask_BxL, train: bool = False):
      v = jnp.sum(jnp.asarray(table_VxE)[tokens_BxL] * mask_BxL[..., None], axis=1)
      return v / jnp.linalg.norm(v, axis=1, keepdims=True)

  prompts = prompt_table(TOK, ["cat", "dog", "ship"], ["a photo of a {}.", "an image of a {}"], 8)
  model = ClosedFormTowers(_config(), prompts)
  ids = np.asarray(prompts)                                                # [3 classes, 2 templates, 8]
  text = _unit((table_VxE[ids] * (ids != 0)[..., None]).sum(axis=2).reshape(6, 8)).reshape(3, 2, 8)
  classes = _unit(text.mean(axis=1))
  rng = np.random.default_rng(1)
  x = rng.normal(size=(4, 8 * 8 * 3))
  x[:, :8] = classes[[2, 0, 0, 1]] + 0.05 * rng.normal(size=(4, 8))   # images near the classes 2, 0, 0, 1
  x = x.astype(np.float32).reshape(4, 8, 8, 3)
  image = _unit(x.reshape(4, -1)[:, :8].astype(np.float64))
  y, template = np.array([2, 0, 1, 2]), np.array([1, 0, 1, 0])
  params = {"params": {"logit_scale": jnp.float32(0.7)}}
  logits, (loss, accuracy) = jax.jit(lambda p: (model.apply(p, jnp.asarray(x)), model.apply(
      p, jnp.asarray(x), jnp.asarray(y), jnp.asarray(template), False, method=ZeroShotCLIP.contrastive)))(params)
  np.testing.assert_allclose(np.asarray(logits), np.exp(0.7) * image @ classes.T, rtol=1e-5, atol=1e-5)
  z = np.exp(0.7) * image @ text[y, template].T
  ce = lambda v: np.mean(np.log(np.exp(v).sum(1)) - np.diag(v))  # noqa: E731
  assert float(loss) == pytest.approx(0.5 * (ce(z) + ce(z.T)), rel=1e-5)
  assert np.argmax(image @ classes.T, axis=1).tolist() == [2, 0, 0, 1] and float(accuracy) == 0.5  # 0.25 by template


def test_tokenizer_words_apostrophes_vocabulary_order_and_length_boundaries():
  """Catches a split that breaks words at apostrophes or drops repeated punctuation, a vocabulary not in order
  of first appearance or keeping the reserved tokens, and max_length ≥ 1 made > 1: the split, ids 2, 3, …
  in order of first appearance, max_length = 1 keeps one word."""
  assert WordTokenizer.split("It's a dog's toy!!") == ["it's", "a", "dog's", "toy", "!", "!"]
  tok = WordTokenizer.from_texts(["b a.", "A c"])
  assert tok.words == ("<pad>", "<unk>", "b", "a", ".", "c") and tok.vocab_size == 6
  assert WordTokenizer(["x", "<pad>", "<unk>", "y"]).words == ("<pad>", "<unk>", "x", "y")
  with pytest.raises(ValueError, match="repeat"):
    WordTokenizer(["a", "A"])
  ids, mask = tok.encode(["c b", "zebra"], 1)
  assert ids.tolist() == [[5], [1]] and mask.tolist() == [[True], [True]]
  for bad in (0, True, 2.0):
    with pytest.raises(ValueError, match="max_length"):
      tok.encode(["a"], bad)


def test_prompt_table_is_class_major_and_takes_a_prompt_of_exactly_max_length_words():
  """Catches the prompt length check `> max_length` made `≥` (the tests above use prompts shorter than
  max_length) and a template-major table: a 6-word prompt fits max_length 6 uncut and is refused at 5; table
  [c][p] decodes to template p filled with class c."""
  from attention.clip import prompt_table
  templates = ["a photo of a {}.", "an image of a {}"]
  table = prompt_table(TOK, ["cat", "ship", "dog"], templates, 6)
  assert np.shape(table) == (3, 2, 6)
  for c, name in enumerate(["cat", "ship", "dog"]):
    for p, template in enumerate(templates):
      words = [TOK.words[i] for i in table[c][p] if i != 0]
      assert words == WordTokenizer.split(template.format(name))
  assert 0 not in table[0][0]  # six words in six slots: nothing cut, nothing padded
  with pytest.raises(ValueError, match="max_length = 5"):
    prompt_table(TOK, ["cat"], templates, 5)


def test_zero_shot_clip_accepts_the_largest_token_id_and_config_fields_at_their_minimum():
  """Catches the checks `id < vocab_size`, `vocab_size ≥ 3` and `field ≥ 1` with an end moved (the tests above
  stop at ids of 99 and vocab_size 2): an id of vocab_size − 1 is accepted, vocab_size and −1 refused;
  vocab_size = 3 and max_length = text_depth = text_heads = 1 validate, 0 is refused naming the field."""
  from attention.clip import ZeroShotCLIP
  config = _config()
  x = jnp.zeros((1, 8, 8, 3))
  top = (((config.vocab_size - 1,) + (0,) * 7,),)
  jax.eval_shape(ZeroShotCLIP(config, top).init, jax.random.key(0), x)
  for bad in (config.vocab_size, -1):
    with pytest.raises(ValueError, match="vocab_size"):
      jax.eval_shape(ZeroShotCLIP(config, (((bad,) + (0,) * 7,),)).init, jax.random.key(0), x)
  dataclasses.replace(config, vocab_size=3).validate()
  for name in ("max_length", "text_depth", "text_heads"):
    dataclasses.replace(config, **{name: 1}).validate()
    with pytest.raises(ValueError, match=f"CLIPConfig.{name} must be an integer >= 1"):
      dataclasses.replace(config, **{name: 0}).validate()


def test_the_towers_have_the_configured_widths_depths_heads_and_initial_temperature():
  """Catches the text tower built with the image tower's depth, heads or width (equal in the configs above),
  the image head not mapped to the embedding width, and a wrong initial temperature: text_dim = 12,
  text_depth = 3, text_heads = 2 against an image tower of width 16, depth 1 and 4 heads, E = 6; the attention
  maps have text_heads heads; logit_scale starts at log(1/0.07) (Radford et al. 2021, §2.5)."""
  import math
  config = CLIPConfig(ViTConfig(image_size=8, patch_size=4, dim=16, depth=1, num_heads=4),
                      vocab_size=TOK.vocab_size, max_length=8, text_dim=12, text_depth=3, text_heads=2, embed_dim=6)
  model = CLIP(config)
  ids, mask = TOK.encode(PROMPTS[:2], 8)
  args = (jnp.zeros((1, 8, 8, 3)), jnp.asarray(ids), jnp.asarray(mask))
  shapes = jax.eval_shape(model.init, jax.random.key(0), *args)["params"]
  text = shapes["text"]
  assert sorted(k for k in text if k.startswith("block_")) == ["block_0", "block_1", "block_2"]
  assert text["token_embed"]["embedding"].shape == (TOK.vocab_size, 12)
  assert text["pos_embed"].shape == (1, 8, 12) and text["projection"]["kernel"].shape == (12, 6)
  assert shapes["image"]["head"]["kernel"].shape == (16, 6)
  _, state = jax.eval_shape(lambda p: model.apply(p, jnp.asarray(ids), jnp.asarray(mask), method=CLIP.encode_text,
                                                  capture_intermediates=True),
                            _random_params(model, *args))
  assert state["intermediates"]["text"]["block_0"]["attention"]["attention_maps"][0].shape == (2, 2, 8, 8)
  init_t = jax.jit(lambda k: model.init(k, *args)["params"]["logit_scale"])(jax.random.key(0))
  assert float(init_t) == pytest.approx(math.log(1 / 0.07), rel=1e-6)
