"""``ModelSpec`` adapters for the project's own models, for ``python -m experiments.report --model ...``.

Each function is a ``pkg.module:function`` callable of the report (arguments as
``experiments.report.adapters:vit(workdir='runs/vit', depth=1)``):

  vit, diffvit:   a ViT / DiffViT checkpoint of a ``train_vit`` or ``diff_attention`` workdir
                  (``<workdir>/models/<name>/checkpoints/<epoch>``, written by
                  ``experiments.trainers.classifier``; the architecture from ``<workdir>/config.json``);
  certified_vit:  a CertifiedViT checkpoint of a ``certify`` workdir (``models/<dataset>_alpha<α>``);
  paper_relu, paper_mlp_attn: the influence paper's 2L-ReLU / MLP-Attn (arXiv 2603.13085 §3), trained
                  here exactly as ``experiments.flip_rate.run`` trains them (``flip_rate.train_model``, same
                  keys), on flattened pixels; they return their data with the model.

Every checkpoint adapter also rebuilds the parameters at initialisation (the same init key as
``experiments.trainers.classifier.train_classifier``), for the NTK section's kernel movement.
"""
from __future__ import annotations

import dataclasses
import typing
from pathlib import Path
from typing import Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from attention.model_spec import ModelSpec


def _from_json(cls, values: dict):
  """A (nested) config dataclass from a config.json dict; unknown keys are ignored, lists become tuples."""
  hints = typing.get_type_hints(cls)
  kwargs = {}
  for f in dataclasses.fields(cls):
    if f.name not in values:
      continue
    value, hint = values[f.name], hints[f.name]
    if isinstance(hint, type) and dataclasses.is_dataclass(hint) and isinstance(value, dict):
      value = _from_json(hint, value)
    elif isinstance(value, list):
      value = tuple(value)
    kwargs[f.name] = value
  return cls(**kwargs)


def read_workdir_config(workdir, cls, runner: str):
  """The config dataclass ``cls`` of a workdir, from its config.json.

  Raises:
    ValueError: the workdir holds no config.json (names the ``runner`` command that writes it).
  """
  path = Path(workdir) / "config.json"
  if not path.exists():
    raise ValueError(f"workdir {workdir} holds no config.json: run python -m experiments.{runner} --workdir "
                     f"{workdir} first")
  from experiments.core.workdir import read_config
  return _from_json(cls, read_config(path))


def _restore_params(module, train_config, x_example, checkpoint_dir: Path):
  """(trained params of the newest checkpoint, params at initialisation) of a classifier_training run."""
  import orbax.checkpoint as ocp
  from experiments.trainers.classifier import make_optimizer
  init_key = jax.random.split(jax.random.PRNGKey(train_config.seed), 3)[0]
  init = module.init(init_key, jnp.asarray(x_example), train=False)["params"]
  target = jax.device_get({"params": init, "opt_state": make_optimizer(train_config, 1).init(init)})
  directory = (checkpoint_dir / "checkpoints").resolve()
  if not directory.is_dir():
    raise ValueError(f"no checkpoints in {directory}: train the model first")
  manager = ocp.CheckpointManager(directory, options=ocp.CheckpointManagerOptions(create=False))
  try:
    step = manager.latest_step()
    if step is None:
      raise ValueError(f"no checkpoint step in {directory}")
    state = manager.restore(step, args=ocp.args.StandardRestore(target))
  finally:
    manager.close()
  return jax.tree_util.tree_map(jnp.asarray, state["params"]), init


def vit(workdir, model: str = "vit", depth: int = 1, lambda_init: str = "0.8") -> ModelSpec:
  """A ViT (model='vit') or DiffViT (model='diffvit', with its λ_init string) of a train_vit /
  diff_attention workdir, as a ``ModelSpec`` on images [B, H, W, C] in [0, 1].

  Raises:
    ValueError: no config.json, unknown model, or no checkpoint of that (model, depth, λ_init).
  """
  from attention.vit import VisionTransformer
  from experiments.trainers import vit as vit_training
  if model not in vit_training.MODELS:
    raise ValueError(f"model must be one of {vit_training.MODELS}, got {model!r}")
  config = read_workdir_config(workdir, vit_training.TrainViTConfig, "train_vit")
  point = vit_training.Point(model, int(depth), vit_training.NO_LAMBDA if model == "vit" else str(lambda_init))
  vit_config = config.vit_config(point.depth, point.lambda_init)
  channels = 3 if config.dataset == "cifar10" else 1
  x_example = np.zeros((1, vit_config.image_size, vit_config.image_size, channels), np.float32)
  params, init = _restore_params(VisionTransformer(vit_config), config.train, x_example,
                                 Path(workdir) / "models" / point.name)
  return ModelSpec(point.name, vit_training.apply_fns(vit_config), params, vit_config.num_classes,
                   init_params=init, module=VisionTransformer(vit_config))


def diffvit(workdir, depth: int = 1, lambda_init: str = "0.8") -> ModelSpec:
  """``vit(workdir, 'diffvit', depth, lambda_init)``."""
  return vit(workdir, "diffvit", depth, lambda_init)


def certified_vit(workdir, dataset: str = "cifar10", attention_bound: Optional[float] = None) -> ModelSpec:
  """A CertifiedViT of a certify workdir (α = attention_bound, default the config's first).

  Raises:
    ValueError: no config.json, or no checkpoint of that (dataset, α).
  """
  from attention.certified_vit import CertifiedViT
  from experiments.certify.config import IMAGE_GEOMETRY, CertifyConfig
  config = read_workdir_config(workdir, CertifyConfig, "certify")
  alpha = float(config.attention_bounds[0] if attention_bound is None else attention_bound)
  model_config = config.model_config(dataset, alpha)
  module = CertifiedViT(model_config)
  size, channels, _ = IMAGE_GEOMETRY[dataset]
  params, init = _restore_params(module, config.train, np.zeros((1, size, size, channels), np.float32),
                                 Path(workdir) / "models" / f"{dataset}_alpha{alpha:g}")
  return ModelSpec(f"certified_vit_{dataset}_alpha{alpha:g}", _certified_apply(model_config), params,
                   model_config.num_classes, init_params=init, module=module)


_CERTIFIED_APPLY: dict = {}


def _certified_apply(model_config):
  """One apply function per architecture (a stable jit identity)."""
  from attention.certified_vit import CertifiedViT
  if model_config not in _CERTIFIED_APPLY:
    module = CertifiedViT(model_config)
    _CERTIFIED_APPLY[model_config] = lambda p, x: module.apply({"params": p}, x)
  return _CERTIFIED_APPLY[model_config]


def _paper_model(model_name: str, task: str, width: int, seed: int, overrides: Sequence[str]):
  import ntk
  from attention import linearized_attention_transductive, normalize_rows
  from experiments.core import config as config_lib
  from experiments.flip_rate import run as flip_rate
  from experiments.flip_rate import config as flip_rate_config
  from experiments.trainers import network as network_training
  config = config_lib.apply_overrides(flip_rate_config.get_config(), [
      f"tasks={task}", f"models={model_name}", f"widths={int(width)}", f"seeds={int(seed)}", *overrides])
  train, test = config_lib.load_splits(config.data, task, flatten=True)
  n_classes = len(train.info.class_ids)
  model = ntk.two_layer_relu(int(width), train.x.shape[1], out_dim=n_classes)
  key = jax.random.fold_in(jax.random.PRNGKey(int(seed)), 0)
  y_tr = np.eye(n_classes)[train.y].astype(np.float32)
  # As flip_rate.run: with data.preprocessing='centered' the rows are centred by the training split's mean.
  mean_row = None if config.data.preprocessing == "raw" else network_training.mean_row(
      network_training.channel_stats(train), train.x.shape[1])
  params = flip_rate.train_model(config, model, model_name, train.x, y_tr, n_classes, key, mean_row=mean_row)
  centre = (lambda v: v) if mean_row is None else (lambda v: v - jnp.asarray(mean_row))  # noqa: E731
  _, init = network_training.init_network(model, model_name, centre(train.x), network_training.split_key(key)[0])
  if model_name == "relu":
    preprocess = lambda x: normalize_rows(centre(x))  # noqa: E731
  else:
    x_keys = jnp.asarray(centre(train.x))
    preprocess = lambda x: linearized_attention_transductive(centre(x), x_keys, normalize=True)  # noqa: E731
  name = {"relu": "2L-ReLU", "mlp_attn": "MLP-Attn"}[model_name]
  spec = ModelSpec(f"{name}_{task}_w{width}_s{seed}", model.apply_fn, params, n_classes, init_params=init,
                   preprocess=preprocess)
  data = dict(x_train=train.x, y_train=train.y, x_test=test.x, y_test=test.y)
  return spec, data


def paper_relu(task: str = "mnist", width: int = 1024, seed: int = 0, overrides: Sequence[str] = ()):
  """The paper's 2L-ReLU (ℓ2-normalised pixels → 2-layer ReLU, fixed ±1 readout), trained as
  ``experiments.flip_rate.run`` trains it for the same config (``overrides``: its field=value strings, e.g.
  ('data.n_train=64', 'train.max_epochs=20')). Returns (ModelSpec, data dict of flattened images)."""
  return _paper_model("relu", task, width, seed, overrides)


def paper_mlp_attn(task: str = "mnist", width: int = 1024, seed: int = 0, overrides: Sequence[str] = ()):
  """The paper's MLP-Attn (rows x X_trᵀX_tr, normalised → 2-layer ReLU) as ``paper_relu``. The attention
  transform needs the training matrix: the spec's preprocess closes over the clean training images, so
  the report's per-point attacks hold it fixed (``influence.model_malleability``)."""
  return _paper_model("mlp_attn", task, width, seed, overrides)
