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
