"""Two-tower contrastive image–text models (CLIP) built from the project's ViT / DiffViT blocks, with standard or
differential attention in both towers (DiffCLIP), and the pieces around them: a word-level tokenizer over the
prompts' own vocabulary, the symmetric contrastive (InfoNCE) loss with a learned temperature, and zero-shot
classification by the nearest class-prompt embedding.

  image tower  ``attention.vit.VisionTransformer`` whose head maps to the embedding width E;
  text tower   token and position embeddings, the same pre-norm encoder blocks over a padded prompt (a padding
               mask keeps padding out of every attention map), a final LayerNorm, the mean over the real
               tokens and a linear map to E;
  both embeddings are normalised to unit length; logits = exp(t) · I Tᵀ with t learned (initialised to
  log(1/0.07)).

Sources: Radford et al., "Learning Transferable Visual Models From Natural Language Supervision" (ICML 2021),
§2.3 and Figure 3 (the loss, the temperature) and §3.1.2 (zero-shot prompts); DiffCLIP (Hammoud & Ghanem,
arXiv 2503.06626), differential attention in both towers; the differential-attention fragility paper
(arXiv 2510.00517) attacks CLIP and DiffCLIP.
"""
from __future__ import annotations

import dataclasses
import math
import re
from typing import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from attention.vit import EncoderBlock, ViTConfig, VisionTransformer

PAD, UNK = "<pad>", "<unk>"
INIT_LOGIT_SCALE = math.log(1 / 0.07)   # CLIP's initial temperature 0.07


class WordTokenizer:
  """Word-level tokenizer over a fixed vocabulary: lower-cased words and punctuation marks; id 0 is padding,
  id 1 unknown words.

  Build it from the prompts themselves (``from_texts``); ``encode`` pads or truncates to a fixed length.
  """

  def __init__(self, vocabulary: Sequence[str]):
    words = [w.lower() for w in vocabulary if w not in (PAD, UNK)]   # ``split`` lower-cases what it reads
    if len(set(words)) != len(words):
      raise ValueError("vocabulary must not repeat a word (case-insensitively)")
    self.words = (PAD, UNK, *words)
    self.ids = {w: i for i, w in enumerate(self.words)}

  @staticmethod
  def split(text: str) -> list[str]:
    """Lower-cased words and single punctuation marks of ``text``."""
    return re.findall(r"[\w']+|[^\w\s]", text.lower())

  @classmethod
  def from_texts(cls, texts: Sequence[str]) -> "WordTokenizer":
    """The tokenizer whose vocabulary is every word of ``texts``, in order of first appearance."""
    return cls(list(dict.fromkeys(w for t in texts for w in cls.split(t))))

  @property
  def vocab_size(self) -> int:
    return len(self.words)

  def encode(self, texts: Sequence[str], max_length: int) -> tuple[np.ndarray, np.ndarray]:
    """(token ids int32 [n, max_length], mask bool [n, max_length]: True on real tokens) of ``texts``, padded
    with id 0 or truncated to ``max_length`` words.

    Raises:
      ValueError: max_length < 1, or a text without words.
    """
    if isinstance(texts, str):
      raise ValueError(f"texts must be a sequence of strings, got the single string {texts!r}")
    if isinstance(max_length, bool) or not isinstance(max_length, (int, np.integer)) or max_length < 1:
      raise ValueError(f"max_length must be an integer >= 1, got {max_length!r}")
    ids = np.zeros((len(texts), max_length), np.int32)
    for i, text in enumerate(texts):
      if not isinstance(text, str):
        raise ValueError(f"texts[{i}] must be a string, got {text!r}")
      words = self.split(text)[:max_length]
      if not words:
        raise ValueError(f"texts[{i}] = {text!r} has no words")
      ids[i, :len(words)] = [self.ids.get(w, 1) for w in words]
    return ids, ids != 0


@dataclasses.dataclass(frozen=True)
class CLIPConfig:
  """Architecture of a CLIP / DiffCLIP pair member.

  Attributes:
    image: the image tower's ``ViTConfig`` (its ``attention`` and ``lambda_init`` are the model's; its
      num_classes is ignored: the head maps to ``embed_dim``).
    vocab_size: token ids in [0, vocab_size) (``WordTokenizer.vocab_size``); max_length: prompt length.
    text_dim, text_depth, text_heads: the text tower's width, blocks and standard heads (2H for H differential
      heads, as in the image tower).
    embed_dim: the shared embedding width E.
  """
  image: ViTConfig
  vocab_size: int
  max_length: int = 16
  text_dim: int = 64
  text_depth: int = 2
  text_heads: int = 4
  embed_dim: int = 64

  def validate(self) -> None:
    """Raises ValueError naming the field and its allowed range."""
    for name in ("vocab_size", "max_length", "text_dim", "text_depth", "text_heads", "embed_dim"):
      value = getattr(self, name)
      if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < (3 if name == "vocab_size" else 1):
        raise ValueError(f"CLIPConfig.{name} must be an integer >= {3 if name == 'vocab_size' else 1}, got {value!r}")
    self.image_config.validate()
    self.text_block_config.validate()

  @property
  def image_config(self) -> ViTConfig:
    return dataclasses.replace(self.image, num_classes=self.embed_dim)

  @property
  def text_block_config(self) -> ViTConfig:
    """The text tower's blocks: the image tower's attention kind and λ_init at the text tower's width."""
    return dataclasses.replace(self.image, dim=self.text_dim, depth=self.text_depth, num_heads=self.text_heads,
                               num_classes=self.embed_dim)


class TextTransformer(nn.Module):
  """Prompt tokens [B, L] (int) and their mask [B, L] (bool) -> text features [B, E] (not normalised)."""
  config: CLIPConfig

  @nn.compact
  def __call__(self, tokens_BxL, mask_BxL, train: bool = False):
    c, block = self.config, self.config.text_block_config
    x = nn.Embed(c.vocab_size, c.text_dim, name="token_embed")(tokens_BxL)
    x = x + self.param("pos_embed", nn.initializers.normal(0.02), (1, c.max_length, c.text_dim))[:, :x.shape[1]]
    for layer in range(c.text_depth):
      x = EncoderBlock(block, layer, name=f"block_{layer}")(x, train, mask_BxN=mask_BxL)
    x = nn.LayerNorm(name="final_norm")(x)
    weights = mask_BxL.astype(x.dtype)[..., None]
    pooled = jnp.sum(x * weights, axis=1) / jnp.maximum(jnp.sum(weights, axis=1), 1.0)
    return nn.Dense(c.embed_dim, name="projection")(pooled)


def _unit(v):
  return v / jnp.maximum(jnp.linalg.norm(v, axis=-1, keepdims=True), 1e-12)


class CLIP(nn.Module):
  """The two towers and the learned temperature; ``__call__`` gives (image [B, E], text [B', E], logit_scale t)
  with unit-length embeddings."""
  config: CLIPConfig

  def setup(self):
    self.config.validate()
    self.image_tower = VisionTransformer(self.config.image_config, name="image")
    self.text_tower = TextTransformer(self.config, name="text")
    self.logit_scale = self.param("logit_scale", nn.initializers.constant(INIT_LOGIT_SCALE), ())

  def encode_image(self, x_BxHxWxC, train: bool = False):
    return _unit(self.image_tower(x_BxHxWxC, train))

  def encode_text(self, tokens_BxL, mask_BxL, train: bool = False):
    return _unit(self.text_tower(tokens_BxL, mask_BxL, train))

  def __call__(self, x_BxHxWxC, tokens_BxL, mask_BxL, train: bool = False):
    return self.encode_image(x_BxHxWxC, train), self.encode_text(tokens_BxL, mask_BxL, train), self.logit_scale


def contrastive_loss(image_BxE, text_BxE, logit_scale) -> jnp.ndarray:
  """CLIP's symmetric InfoNCE loss: the mean of the cross-entropies of exp(t)·I Tᵀ over rows (image → its
  text) and over columns (text → its image), pair i being row i of both (Radford et al. 2021, Figure 3).

  Args: unit-length embeddings [B, E] (float32); logit_scale: the learned log-temperature t (scalar).
  Returns: a float32 scalar.
  """
  logits = jnp.exp(logit_scale) * image_BxE @ text_BxE.T
  labels = jnp.arange(logits.shape[0])
  rows = -jnp.take_along_axis(jax.nn.log_softmax(logits, axis=1), labels[:, None], axis=1)
  cols = -jnp.take_along_axis(jax.nn.log_softmax(logits, axis=0), labels[None, :], axis=0)
  return 0.5 * (jnp.mean(rows) + jnp.mean(cols))


def class_embeddings(text_embeddings_CxPxE) -> jnp.ndarray:
  """Zero-shot class embeddings [C, E]: each class's prompt embeddings (P templates) averaged and renormalised
  (Radford et al. 2021, §3.1.4)."""
  return _unit(jnp.mean(text_embeddings_CxPxE, axis=1))


def zero_shot_logits(image_BxE, classes_CxE, logit_scale) -> jnp.ndarray:
  """Zero-shot logits [B, C] = exp(t)·I Cᵀ: the prediction is the class whose prompt embedding is nearest."""
  return jnp.exp(logit_scale) * image_BxE @ classes_CxE.T


class ZeroShotCLIP(CLIP):
  """A CLIP / DiffCLIP with its class prompts built in, so that it is a classifier like any other: calling it on
  images [B, H, W, C] gives the zero-shot logits [B, C] (every attack and accuracy of the project takes it as
  its ``logits_fn``); ``contrastive`` gives the training loss on (image, caption) pairs.

  Attributes:
    prompts: token ids [C][P][L] as nested tuples of ints (hashable, so one compiled program per model
      architecture): class c's P template prompts, padded with 0 to L = config.max_length
      (``WordTokenizer.encode``); ``prompt_table`` builds them.
  Parameters: those of ``CLIP`` (the same tree).
  """
  prompts: tuple = ()

  def setup(self):
    super().setup()
    shape = np.shape(np.asarray(self.prompts, dtype=object)) if self.prompts else ()
    if len(shape) != 3 or shape[2] != self.config.max_length:
      raise ValueError(f"prompts must be token ids [classes][templates][max_length = {self.config.max_length}] "
                       f"(prompt_table), got shape {shape}")
    ids = np.asarray(self.prompts)
    if ids.min() < 0 or ids.max() >= self.config.vocab_size:
      raise ValueError(f"prompts must hold token ids in [0, vocab_size = {self.config.vocab_size}), got "
                       f"[{ids.min()}, {ids.max()}]")

  def class_embeddings(self, train: bool = False):
    """Unit-length class embeddings [C, E]: each class's prompt embeddings averaged and renormalised."""
    tokens = jnp.asarray(self.prompts, jnp.int32)
    c, p, length = tokens.shape
    flat = tokens.reshape(c * p, length)
    return class_embeddings(self.encode_text(flat, flat != 0, train).reshape(c, p, -1))

  def __call__(self, x_BxHxWxC, train: bool = False):
    return self.logits_against(x_BxHxWxC, self.class_embeddings(train), train)

  def logits_against(self, x_BxHxWxC, classes_CxE, train: bool = False):
    """Zero-shot logits [B, C] against given class embeddings (``class_embeddings``, computed once for a model
    whose parameters do not change, e.g. under attack: the text tower then runs once, not at every step)."""
    return zero_shot_logits(self.encode_image(x_BxHxWxC, train), classes_CxE, self.logit_scale)

  def contrastive(self, x_BxHxWxC, y_B, template_B, train: bool = True):
    """(CLIP's symmetric InfoNCE loss over the batch's (image, caption) pairs, zero-shot top-1 accuracy on the
    batch): image b's caption is template ``template_B[b]`` of class ``y_B[b]``. Captions of one class repeat
    within a batch; as in CLIP, every other pair of the batch is a negative."""
    tokens = jnp.asarray(self.prompts, jnp.int32)[y_B, template_B]
    image = self.encode_image(x_BxHxWxC, train)
    loss = contrastive_loss(image, self.encode_text(tokens, tokens != 0, train), self.logit_scale)
    logits = zero_shot_logits(image, self.class_embeddings(train), self.logit_scale)
    return loss, jnp.mean(jnp.argmax(logits, -1) == y_B)


def check_templates(templates: Sequence[str]) -> None:
  """Raises ValueError unless there is a template and each holds one '{}' for the class name (and no other
  braces: str.format must accept it)."""
  if not templates:
    raise ValueError("templates must hold at least one template with '{}'")
  for t in templates:
    try:
      ok = isinstance(t, str) and t.count("{}") == 1 and t.format("x") is not None
    except (KeyError, IndexError, ValueError):
      ok = False
    if not ok:
      raise ValueError(f"templates must each hold one '{{}}' for the class name (and no other braces), got {t!r}")


def prompt_table(tokenizer: WordTokenizer, class_names: Sequence[str], templates: Sequence[str],
                 max_length: int) -> tuple:
  """``ZeroShotCLIP.prompts``: template.format(name) for every class and template, tokenized and padded.

  Raises:
    ValueError: no template, a template without exactly one '{}' placeholder (or that str.format refuses),
      class names that are equal case-insensitively, a prompt word the tokenizer does not know, or a prompt
      longer than max_length words (it would be cut, and two classes could then share a prompt).
  """
  check_templates(templates)
  if len({n.lower() for n in class_names}) != len(class_names):
    raise ValueError(f"class_names must differ case-insensitively (the tokenizer lower-cases), got {list(class_names)}")
  table = []
  for name in class_names:
    texts = [t.format(name) for t in templates]
    unknown = sorted({w for t in texts for w in tokenizer.split(t) if w not in tokenizer.ids})
    if unknown:
      raise ValueError(f"the prompts of class {name!r} hold words the tokenizer does not know: {unknown}")
    long = [t for t in texts if len(tokenizer.split(t)) > max_length]
    if long:
      raise ValueError(f"max_length = {max_length} words cuts the prompt {long[0]!r}: raise max_length")
    ids, _ = tokenizer.encode(texts, max_length)
    table.append(tuple(tuple(int(i) for i in row) for row in ids))
  return tuple(table)
