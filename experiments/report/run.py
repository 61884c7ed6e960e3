"""One sensitivity report for any Flax attention model: robustness, local Lipschitz, NTK regime, influence
malleability, per-layer attention bounds and certified radius, side by side.

Usage:
  python -m experiments.report --workdir DIR --model pkg.module:function [--model ...] [field=value ...]

``--model`` names a callable returning an ``attention.model_spec.ModelSpec``, or (ModelSpec, data) with
data a dict of arrays x_train, y_train, x_test, y_test (else the config's data set is loaded);
keyword arguments may follow as literals, e.g.
``--model "experiments.report.adapters:vit(workdir='runs/vit', depth=1)"``. Adapters for the project's
models are in ``experiments.report.adapters``. From Python, ``run_report(models, config, workdir)``
returns the records (workdir None: nothing is written).

Sections (each computed where it applies, otherwise recorded as skipped with the reason; a section that
raises is recorded with its error and the others still run; a rerun resumes, redoing only the sections
without an ok or skipped record):
  1. robustness: clean accuracy; ASR vs ε of PGD-L∞, APGD-CE and APGD-DLR (≥ 3 classes) on the
     clean-correct images (AutoAttack convention), Clopper–Pearson intervals; CW-L2 on the first
     ``cw_samples`` clean-correct images on an L2 grid; zero-gradient counts (``attacks``);
  2. lipschitz: local Lipschitz estimates of the logits at each ε (Yang et al., arXiv 2003.02460;
     ``attention.local_lipschitz``);
  3. ntk: the empirical NTK of the whole model over its logits on ``ntk_train`` training and ``ntk_test``
     test images; condition number, effective rank, and with init_params the kernel movement
     (``ntk.model_kernel``; the implementation chosen for the memory budget is printed);
  4. influence: NTK-LOO influence of those training images on those test images, its flip rate and
     Spearman ρ under FGSM / PGD on each training image against its own loss, beside ε = 0 and the
     random-sign control (arXiv 2603.13085 §5; ``influence.model_malleability``);
  5. attention: per captured layer (``attention.capture``) entropy and largest weight; for softmax
     dot-product heads the local bound at the images' own tokens beside a PGD deviation
     (``attention.layer_bounds``; a bound below its attack makes the section an error); for differential
     heads cos θ, Lemma 1 and Theorem 3 (``attention.layer_statistics``);
  6. certified: the certified ℓ2 radius of a CertifiedViT (``attention.certification``); any other model
     is "not certifiable by this method".
Writes config.json, results.jsonl (one record per model × section, key (model, section)), arrays/ (the
NTK kernels, .npz), plots and summary.md (``experiments.report.report``).
"""
from __future__ import annotations

import ast
import dataclasses
import hashlib
import functools
import importlib
import importlib.util
import math
import sys
import time
from pathlib import Path
from typing import Any, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

import attacks
from attention.model_spec import ModelSpec, validate_model_spec
from experiments.core import config as config_lib
from experiments.report.config import ReportConfig

KEY_FIELDS = ("model", "section")
ROUNDING = 1e-4   # relative float32 allowance between a layer bound and its attack
NOT_CERTIFIABLE = "not certifiable by this method"


# ----------------------------------------------------------------------------------------------- models


def _one_line(error: BaseException) -> str:
  lines = str(error).strip().splitlines()
  return f"{type(error).__name__}: {lines[0] if lines else ''}".rstrip(": ")


def parse_model_ref(ref: str) -> tuple[str, str, dict]:
  """'pkg.module:function', 'path/to/file.py:function', or either with '(key=literal, ...)' -> (module or
  file path, function, kwargs).

  Raises:
    ValueError: not of that form, or arguments that are not keyword literals.
  """
  text = ref.strip()
  head, _, rest = text.partition("(")
  module, sep, function = head.strip().rpartition(":")
  if not sep or not module or not function.isidentifier():
    raise ValueError(f"--model must look like pkg.module:function, path/to/file.py:function, or either with "
                     f"(key=value, ...), got {ref!r}")
  kwargs = {}
  if rest:
    try:
      call = ast.parse(f"f({rest}", mode="eval").body
      if call.args:
        raise ValueError("positional arguments")
      kwargs = {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords}
    except (SyntaxError, ValueError) as e:
      raise ValueError(f"--model {ref!r}: arguments must be keyword literals (key='text', n=3): {e}") from None
  return module, function, kwargs


def _import(module_name: str):
  """A module by dotted name, or from a file when the name ends in .py (path/to/file.py)."""
  if not module_name.endswith(".py"):
    return importlib.import_module(module_name)
  path = Path(module_name).expanduser().resolve()
  if not path.is_file():
    raise FileNotFoundError(f"no file {path}")
  spec = importlib.util.spec_from_file_location(f"_report_model_{path.stem}", path)
  module = importlib.util.module_from_spec(spec)
  sys.modules[spec.name] = module
  spec.loader.exec_module(module)
  return module


def load_model(ref: str):
  """Imports and calls a ``--model`` reference; returns (ModelSpec, data dict or None).

  Raises:
    ValueError (one line): the module or function cannot be imported, the call fails, or it returns
      neither a ModelSpec nor (ModelSpec, data).
  """
  module_name, function, kwargs = parse_model_ref(ref)
  if module_name == "experiments.model_adapters":
    raise ValueError(f"--model {ref}: experiments.model_adapters is now experiments.report.adapters "
                     f"(--model 'experiments.report.adapters:{function}(...)')")
  try:
    module = _import(module_name)
  except (Exception, SystemExit) as e:  # noqa: BLE001 (any import failure, sys.exit too, is the user's, in one line)
    hint = ("" if module_name.endswith(".py") else "; the module must be importable: on PYTHONPATH (e.g. run from "
            "its parent directory), or give a file path, path/to/file.py:function")
    raise ValueError(f"--model {ref}: cannot import module {module_name!r}: {_one_line(e)}{hint}") from None
  fn = getattr(module, function, None)
  if not callable(fn):
    raise ValueError(f"--model {ref}: module {module_name!r} has no callable {function!r}")
  try:
    out = fn(**kwargs)
  except Exception as e:  # noqa: BLE001
    raise ValueError(f"--model {ref}: the call failed: {_one_line(e)}") from None
  return _split_model(out, ref)


def _split_model(out, ref):
  data = None
  if isinstance(out, tuple) and not isinstance(out, ModelSpec) and len(out) == 2:
    out, data = out
  if not isinstance(out, ModelSpec):
    raise ValueError(f"--model {ref}: the callable must return an attention.model_spec.ModelSpec (or "
                     f"(ModelSpec, data)), got {type(out).__module__}.{type(out).__qualname__}")
  if data is not None:
    if not isinstance(data, dict) or any(k not in data for k in ("x_train", "y_train", "x_test", "y_test")):
      raise ValueError(f"--model {ref}: data must be a dict with x_train, y_train, x_test, y_test")
    data = {k: np.asarray(data[k]) for k in ("x_train", "y_train", "x_test", "y_test")}
  return out, data


@functools.lru_cache(maxsize=64)
def composed_apply(apply_fn, preprocess):
  """(params, x) -> apply_fn(params, preprocess(x)): one function object per (apply_fn, preprocess), so
  compiled attacks and kernels are reused across calls."""
  if preprocess is None:
    return apply_fn
  return lambda params, x: apply_fn(params, preprocess(x))


def _check_data(spec: ModelSpec, data: dict) -> None:
  """Raises ValueError (one line) when the data does not fit the model."""
  for split in ("train", "test"):
    x, y = data[f"x_{split}"], data[f"y_{split}"]
    if len(x) != len(y):
      raise ValueError(f"model {spec.name}: x_{split} has {len(x)} rows but y_{split} has {len(y)}")
    if len(y) and (not np.issubdtype(y.dtype, np.integer) or y.min() < 0 or y.max() >= spec.num_classes):
      raise ValueError(f"model {spec.name}: y_{split} must hold integer labels in [0, {spec.num_classes}) "
                       f"(data that does not fit the model), got [{y.min()}, {y.max()}] ({y.dtype})")
  if len(data["x_test"]) < 1:
    raise ValueError(f"model {spec.name}: the data has no test image")
  validate_model_spec(spec, data["x_test"][:8])


# ---------------------------------------------------------------------------------------------- context


@dataclasses.dataclass
class _Context:
  spec: ModelSpec
  data: dict
  config: ReportConfig
  key: Any
  workdir: Optional[Path]
  cache: dict

  @property
  def fn(self):
    return composed_apply(self.spec.apply_fn, self.spec.preprocess)

  @property
  def logits_fn(self):
    return jax.tree_util.Partial(self.fn, self.spec.params)

  @property
  def bounds(self):
    return tuple(float(v) for v in self.spec.input_range)


class Skip(Exception):
  """A section that does not apply; the message is the reason."""


class SectionError(Exception):
  """A section that computed its fields but found an error (e.g. a bound below its attack)."""

  def __init__(self, message, fields):
    super().__init__(message)
    self.fields = fields


def _interval(k: int, n: int) -> Optional[list]:
  from experiments.core.verdicts import clopper_pearson
  if n < 1:
    return None
  ci = clopper_pearson(int(k), int(n))
  return [ci.low, ci.high]


def _predict(logits_fn, x, batch: int) -> np.ndarray:
  return np.concatenate([np.asarray(jnp.argmax(logits_fn(jnp.asarray(x[i:i + batch])), -1))
                         for i in range(0, len(x), batch)])


def _batched(attack, logits_fn, x, y, batch: int, **kwargs):
  outs = [attack(logits_fn, jnp.asarray(x[i:i + batch]), jnp.asarray(y[i:i + batch]), **kwargs)
          for i in range(0, len(x), batch)]
  return (np.concatenate([np.asarray(o.success) for o in outs]),
          np.concatenate([np.asarray(o.zero_grad) for o in outs]),
          np.concatenate([np.asarray(o.x_adv) for o in outs]))


# --------------------------------------------------------------------------------------------- sections


def eps_units(bounds) -> str:
  """What ε = k/255 means for a model whose attacks clip to ``bounds``: pixel levels on [0, 1], otherwise
  k/255 of one unit of that range (e.g. a standardised unit), never pixels."""
  low, high = (float(v) for v in bounds)
  if (low, high) == (0.0, 1.0):
    return "[0, 1] pixel scale (k/255 = k 8-bit levels)"
  return f"input_range [{low:.4g}, {high:.4g}] units (k/255 of one unit of that range, not of a pixel)"


def section_robustness(ctx: _Context) -> dict:
  """Clean accuracy, ASR vs ε (PGD-L∞, APGD-CE, APGD-DLR), CW-L2 on a subset, zero-gradient counts."""
  c = ctx.config
  x, y = ctx.data["x_test"], ctx.data["y_test"]
  if c.attack_samples is not None:
    x, y = x[:c.attack_samples], y[:c.attack_samples]
  pred = _predict(ctx.logits_fn, x, c.attack_batch_size)
  correct = pred == y
  out = dict(n_attack_pool=len(y), n_clean_correct=int(correct.sum()), clean_accuracy=float(correct.mean()),
             clean_accuracy_ci=_interval(int(correct.sum()), len(y)), eps_255=list(c.eps_255),
             input_range=list(ctx.bounds), eps_units=eps_units(ctx.bounds),
             convention="clean_correct", asr={}, asr_ci={}, n_success={}, n_zero_grad={}, notes=[])
  xc, yc = x[correct], y[correct]
  if len(yc) == 0:
    raise Skip(f"no clean-correct image among {len(y)} (clean accuracy 0): nothing to attack")
  attack_list = [("pgd", attacks.pgd_linf, {}), ("apgd_ce", attacks.apgd, dict(loss="ce"))]
  if ctx.spec.num_classes >= 3:
    attack_list.append(("apgd_dlr", attacks.apgd, dict(loss="dlr")))
  else:
    out["notes"].append("APGD-DLR skipped: it needs at least 3 classes")
  for a_i, (name, attack, extra) in enumerate(attack_list):
    rates, cis, wins, zeros = [], [], [], []
    for e_i, e255 in enumerate(c.eps_255):
      eps = e255 / 255.0
      key = jax.random.fold_in(jax.random.fold_in(ctx.key, 100 + a_i), e_i)
      if name == "pgd":
        kw = dict(alpha=c.pgd_step_ratio * eps, steps=c.pgd_steps)
      else:
        kw = dict(steps=c.apgd_steps, **extra)
      success, zero, _ = _batched(attack, ctx.logits_fn, xc, yc, c.attack_batch_size, eps=eps, key=key,
                                  bounds=ctx.bounds, **kw)
      rates.append(float(success.mean()))
      cis.append(_interval(int(success.sum()), len(yc)))
      wins.append(int(success.sum()))
      zeros.append(int(zero.sum()))
    out["asr"][name], out["asr_ci"][name], out["n_success"][name], out["n_zero_grad"][name] = rates, cis, wins, zeros
  if c.cw_samples == 0:
    out["notes"].append("CW-L2 not run (cw_samples = 0)")
    out["zero_grad_max"] = int(max(max(v) for v in out["n_zero_grad"].values()))
    return out
  sub = np.arange(min(c.cw_samples, len(yc)))
  success, zero, x_adv = _batched(attacks.cw_l2, ctx.logits_fn, xc[sub], yc[sub], c.attack_batch_size,
                                  steps=c.cw_steps, search_steps=c.cw_search_steps, bounds=ctx.bounds)
  grid = np.asarray(attacks.success_within_l2(xc[sub], x_adv, success, np.asarray(c.cw_l2_grid, np.float32)))
  dist = np.sqrt(np.sum(np.square((x_adv - xc[sub]).reshape(len(sub), -1)), axis=1))
  out["cw_l2"] = dict(n=len(sub), l2_grid=list(c.cw_l2_grid), asr=grid.mean(axis=1).tolist(),
                      asr_ci=[_interval(int(g.sum()), len(sub)) for g in grid],
                      median_l2_found=float(np.median(dist[success])) if success.any() else None,
                      any_size_success=float(success.mean()), n_zero_grad=int(zero.sum()))
  out["zero_grad_max"] = int(max(max(v) for v in out["n_zero_grad"].values()))
  return out


def section_lipschitz(ctx: _Context) -> dict:
  """Local Lipschitz estimates of the logits at each ε (Yang et al. 2020), per image and mean."""
  from attention.local_lipschitz import local_lipschitz
  c = ctx.config
  x = ctx.data["x_test"][:c.lipschitz_samples]
  means, stds, values = [], [], []
  for i, e255 in enumerate(c.eps_255):
    v = np.asarray(local_lipschitz(ctx.logits_fn, jnp.asarray(x), eps=e255 / 255.0,
                                   key=jax.random.fold_in(ctx.key, 200 + i), steps=c.lipschitz_steps,
                                   bounds=ctx.bounds))
    means.append(float(v.mean()))
    stds.append(float(v.std()))
    values.append(v.tolist())
  return dict(eps_255=list(c.eps_255), n=len(x), mean=means, std=stds, values=values,
              output="logits, ‖Δf‖₁ / ‖Δx‖∞")


def _ntk_sample(ctx: _Context):
  c = ctx.config
  x_tr, y_tr = ctx.data["x_train"][:c.ntk_train], ctx.data["y_train"][:c.ntk_train]
  x_te, y_te = ctx.data["x_test"][:c.ntk_test], ctx.data["y_test"][:c.ntk_test]
  if len(x_tr) < 2 or len(x_te) < 1:
    raise Skip(f"sample too small: the NTK needs >= 2 training and >= 1 test images, got {len(x_tr)} and "
               f"{len(x_te)}")
  return x_tr, y_tr, x_te, y_te


def _kernels(ctx: _Context):
  """(K_train, K_test_train, plan) at the trained parameters, computed once per model and run."""
  from ntk.model_kernel import describe_plan, model_ntk
  if "kernels" not in ctx.cache:
    x_tr, _, x_te, _ = _ntk_sample(ctx)
    memory = int(ctx.config.memory_gb * 2 ** 30)
    k_tr, plan = model_ntk(ctx.fn, ctx.spec.params, x_tr, memory_bytes=memory)
    print(f"  {ctx.spec.name}: {describe_plan(plan)}", flush=True)
    k_te, _ = model_ntk(ctx.fn, ctx.spec.params, x_te, x_tr, plan=plan)
    ctx.cache["kernels"] = (k_tr, k_te, plan)
  return ctx.cache["kernels"]


def section_ntk(ctx: _Context) -> dict:
  """Empirical NTK over the logits: condition number, effective rank, kernel movement from init."""
  from ntk.model_kernel import kernel_movement, kernel_statistics, model_ntk
  k_tr, k_te, plan = _kernels(ctx)
  stats = kernel_statistics(k_tr)
  out = dict(n_train=int(k_tr.shape[0]), n_test=int(k_te.shape[0]), implementation=plan.implementation,
             block_rows=plan.block_rows, n_params=plan.n_params, memory_budget_bytes=plan.memory_bytes,
             **{f"kernel_{k}": v for k, v in stats._asdict().items() if k != "n"})
  arrays = dict(k_train=k_tr, k_test_train=k_te)
  if ctx.spec.init_params is not None:
    x_tr = _ntk_sample(ctx)[0]
    k0, _ = model_ntk(ctx.fn, ctx.spec.init_params, x_tr, plan=plan)
    arrays["k_init"] = k0
    out["kernel_movement"] = kernel_movement(k_tr, k0)
    init_stats = kernel_statistics(k0)
    out["init_condition_number"] = init_stats.condition_number
    zero = _zero_weight_paths(ctx.spec.init_params)
    out["init_zero_weights"] = zero
    out["init_degenerate"] = bool(zero) or not math.isfinite(init_stats.condition_number)
    if out["init_degenerate"]:
      why = (f"all-zero initial weights at {', '.join(zero[:3])}{' …' if len(zero) > 3 else ''} (e.g. a "
             "zero-initialised head: no gradient reaches the layers before it)" if zero else
             "λ_min(K₀) ≤ 0")
      out["notes"] = [f"K₀ is degenerate ({why}): its condition number says nothing, and the kernel movement "
                      "‖K − K₀‖/‖K₀‖ is measured from a kernel most parameters do not enter, so neither says how "
                      "far the model left its kernel regime"]
  else:
    out["kernel_movement"] = None
    out["notes"] = ["no init_params: kernel movement not measured"]
  if ctx.workdir is not None:
    (ctx.workdir / "arrays").mkdir(exist_ok=True)
    path = ctx.workdir / "arrays" / f"{_file_name(ctx.spec.name)}_ntk.npz"
    np.savez(path, **arrays)
    out["arrays"] = str(path.relative_to(ctx.workdir))
  return out


def _zero_weight_paths(params) -> list[str]:
  """Paths of the Flax layer weights (leaves named ``kernel``) that are all zero: such a layer passes no
  gradient to the layers before it (biases, tokens and embeddings start at zero by design and do not)."""
  out = []
  for path, leaf in jax.tree_util.tree_flatten_with_path(params)[0]:
    keys = [str(getattr(k, "key", getattr(k, "idx", getattr(k, "name", k)))) for k in path]
    if keys[-1:] == ["value"]:
      keys = keys[:-1]  # an nnx.State leaf
    a = np.asarray(leaf)
    if keys and keys[-1] == "kernel" and a.size and not np.any(a):
      out.append("/".join(keys))
  return out


def _file_name(name: str) -> str:
  return "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in name)


def section_influence(ctx: _Context) -> dict:
  """NTK-LOO influence and its flip rate under attacks on each training image (paper's measure)."""
  from influence.model_malleability import influence_malleability
  from ntk.model_kernel import model_ntk
  c = ctx.config
  if ctx.bounds != (0.0, 1.0):
    raise Skip(f"the training-image attacks work on the [0, 1] pixel scale; input_range is {ctx.bounds}")
  x_tr, y_tr, x_te, y_te = _ntk_sample(ctx)
  if len(x_tr) < 10:
    raise Skip(f"sample too small: the flip rate of the top {c.top_fraction:.0%} needs >= 10 training images, "
               f"got {len(x_tr)}")
  k_tr, k_te, plan = _kernels(ctx)

  def kernel_fn(a, b):
    return model_ntk(ctx.fn, ctx.spec.params, a, b, plan=plan)[0]

  before, points = influence_malleability(
      kernel_fn, ctx.logits_fn, x_tr, y_tr, x_te, y_te, ctx.spec.num_classes, eps=c.influence_eps,
      attacks=c.influence_attacks, key=jax.random.PRNGKey(c.seed), top_fraction=c.top_fraction,
      pgd_steps=c.influence_pgd_steps, clean_kernels=(k_tr, k_te))
  rows = [dict(p._asdict(), flip_rate_ci=_interval(p.n_flipped, p.n_top)) for p in points]
  return dict(n_train=len(x_tr), n_test=len(x_te), ridge=before.ridge, top_fraction=c.top_fraction,
              scores=before.scores.tolist(), points=rows,
              helpful_fraction=float(np.mean(before.scores > 0)))


def section_attention(ctx: _Context) -> dict:
  """Per captured attention layer: entropy, largest weight, local bound vs PGD, differential alignment."""
  from attention.capture import capture_attention
  from attention.layer_bounds import BOUND_KINDS, layer_bound_check
  from attention.layer_statistics import attention_statistics, differential_alignment
  c = ctx.config
  x = jnp.asarray(ctx.data["x_test"][:c.bound_samples])
  if ctx.spec.preprocess is not None:
    x = ctx.spec.preprocess(x)
  cap = capture_attention(ctx.spec.apply_fn, ctx.spec.params, x)
  if not cap.layers:
    raise Skip("no recognised attention layer (flax.linen.MultiHeadDotProductAttention, flax.nnx.MultiHeadAttention, "
               "MultiHeadSelfAttention, DifferentialAttention, CertifiedViT attention)")
  layers, violations = [], []
  for i, layer in enumerate(cap.layers):
    row = dict(path=layer.path, kind=layer.kind, bound_applicable=layer.bound_applicable, reason=layer.reason,
               augmented=layer.augmented)
    if layer.heads is not None or layer.weights is not None:
      st = attention_statistics(layer)
      row.update(maps=list(st.maps), entropy=st.entropy.mean(axis=(1, 2)).tolist(),
                 entropy_per_head=st.entropy.mean(axis=1).tolist(), max_weight=st.max_weight.mean(axis=(1, 2)).tolist(),
                 log_tokens=st.log_tokens)
    if layer.bound_applicable:
      check = layer_bound_check(layer, c.bound_eps, key=jax.random.fold_in(ctx.key, 300 + i),
                                power_iters=c.bound_power_iters, pgd_steps=c.bound_pgd_steps,
                                pgd_restarts=c.bound_pgd_restarts)
      bad = {k: int(np.sum(check.deviation > check.bounds[k] * (1 + ROUNDING))) for k in BOUND_KINDS}
      row.update(bound_eps=list(c.bound_eps), n_samples=int(check.deviation.shape[0]),
                 bound={k: check.bounds[k].tolist() for k in BOUND_KINDS}, deviation=check.deviation.tolist(),
                 bound_min_mean=check.bounds["min"].mean(axis=0).tolist(),
                 deviation_mean=check.deviation.mean(axis=0).tolist(),
                 tightness_max=float(np.max(check.deviation / np.maximum(check.bounds["min"], 1e-30))),
                 jacobian_norm=check.jacobian_norm.tolist(), violations=bad)
      if any(bad.values()):
        violations.append(f"{layer.path} ({', '.join(k for k, v in bad.items() if v)})")
    if layer.kind == "DifferentialAttention" and layer.heads is not None:
      al = differential_alignment(layer, max_samples=c.alignment_samples, chunk_size=c.alignment_chunk)
      row.update(alignment=dict(n_samples=int(al.cos_theta.shape[0]), lam=al.lam, cos_theta=al.cos_theta.tolist(),
                                rho=al.rho.tolist(), cos_theta_mean=float(al.cos_theta.mean()),
                                negative_alignment_frequency=float((al.cos_theta < 0).mean()),
                                lemma1_max_relative_error=float(al.lemma1_relative_error.max()),
                                theorem3_gamma1_frequency=float(al.theorem3_gamma1.mean())))
    layers.append(row)
  out = dict(n_layers=len(layers), n_bound_applicable=sum(r["bound_applicable"] for r in layers), layers=layers)
  if violations:
    raise SectionError(f"a layer bound lies below its PGD deviation at {'; '.join(violations)}", out)
  return out


def section_certified(ctx: _Context) -> dict:
  """Certified ℓ2 radius of a CertifiedViT (margin certificate through the local layer bounds)."""
  from attention import certification
  from attention.certified_vit import CertifiedViT, embedding_lipschitz
  c = ctx.config
  if not isinstance(ctx.spec.module, CertifiedViT):
    raise Skip(NOT_CERTIFIABLE)
  if ctx.spec.preprocess is not None:
    raise Skip(f"{NOT_CERTIFIABLE}: a preprocess sits before the CertifiedViT")
  x, y = ctx.data["x_test"][:c.cert_samples], ctx.data["y_test"][:c.cert_samples]
  model_config = ctx.spec.module.config
  logits, consts = certification.layer_constants(model_config, ctx.spec.params, jnp.asarray(x),
                                                 key=jax.random.fold_in(ctx.key, 400), power_iters=c.cert_power_iters)
  radii = np.asarray(certification.certified_radius(
      consts, logits, jnp.asarray(y), certification.head_kernel(ctx.spec.params),
      embed_lipschitz=embedding_lipschitz(ctx.spec.params), eps_max=4.0 * max(c.cert_eps)))
  cert = [int(np.sum(radii >= e)) for e in c.cert_eps]
  return dict(n=len(y), radii=radii.tolist(), radius_mean=float(radii.mean()), radius_median=float(np.median(radii)),
              cert_eps=list(c.cert_eps), certified_accuracy=[k / len(y) for k in cert],
              certified_accuracy_ci=[_interval(k, len(y)) for k in cert],
              clean_accuracy=float(np.mean(np.argmax(np.asarray(logits), 1) == y)))


SECTION_FNS = dict(robustness=section_robustness, lipschitz=section_lipschitz, ntk=section_ntk,
                   influence=section_influence, attention=section_attention, certified=section_certified)


# ------------------------------------------------------------------------------------------------ runner


class _MemoryStore:
  """Records kept in memory (``run_report`` without a workdir)."""

  def __init__(self):
    self._records = []

  def records(self):
    return list(self._records)

  def append(self, record):
    from experiments.core.workdir import jsonable, versions
    stored = jsonable({**record, "versions": versions()})
    self._records.append(stored)
    return stored


def _resolve_models(models) -> list[tuple[ModelSpec, Optional[dict], str]]:
  out = []
  for m in models:
    if isinstance(m, str):
      spec, data = load_model(m)
      out.append((spec, data, m))
    else:
      spec, data = _split_model(m, "<python object>")
      out.append((spec, data, spec.name))
  names = [s.name for s, _, _ in out]
  if len(set(names)) != len(names):
    raise ValueError(f"model names must be distinct (they key the records), got {names}")
  return out


def model_key(seed: int, name: str):
  """The PRNG key of one model's random starts: ``fold_in(PRNGKey(seed), h)`` with h the first 31 bits of
  sha256(name), so a model's records do not depend on its position in the ``--model`` list."""
  digest = int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "big") & 0x7FFFFFFF
  return jax.random.fold_in(jax.random.PRNGKey(seed), digest)


def run_report(models: Sequence, config: Optional[ReportConfig] = None, workdir=None, *,
               overwrite_config: bool = False, verbose: bool = True) -> list[dict]:
  """Runs (or resumes) every section of the report for every model; returns the records.

  Args:
    models: ``ModelSpec``s, (ModelSpec, data) pairs, or ``--model`` reference strings.
    config: a ``ReportConfig`` (default: the quick one); its ``models`` field is set from ``models``.
    workdir: output directory (config.json, results.jsonl, arrays/); None keeps the records in memory.
    overwrite_config: move another config's results aside (``experiments.core.workdir.Workdir``).
    verbose: print each section's outcome and time.

  Returns:
    All records of the workdir (or of this call), one per model × section with fields model, section,
    status ('ok', 'skipped', 'error'), reason / error, wall_time_s and the section's fields.

  Raises:
    ValueError (one line): bad config, a model that cannot be imported or returns the wrong type, an
      apply_fn returning NaN or the wrong shape, data that does not fit the model.
  """
  from experiments.core.workdir import Workdir
  config = config or ReportConfig()
  resolved = _resolve_models(models)
  config = dataclasses.replace(config, models=tuple(ref for _, _, ref in resolved))
  config.validate()
  loaded = {}
  prepared = []
  for spec, data, _ in resolved:
    if data is None:
      if "default" not in loaded:
        train, test = config_lib.load_splits(config.data, config.dataset)
        loaded["default"] = dict(x_train=train.x, y_train=train.y, x_test=test.x, y_test=test.y)
      data = loaded["default"]
    _check_data(spec, data)
    prepared.append((spec, data))
  if workdir is None:
    store, path = _MemoryStore(), None
  else:
    # Keyed by model name: the workdir's config leaves the model list out, so adding a model to a finished
    # workdir computes only the new model's sections.
    store = Workdir(workdir, KEY_FIELDS, dataclasses.replace(config, models=()), overwrite_config=overwrite_config)
    path = Path(workdir)
  done = {(r["model"], r["section"]) for r in store.records() if r.get("status") in ("ok", "skipped")}
  for spec, data in prepared:
    ctx = _Context(spec, data, config, model_key(config.seed, spec.name), path, {})
    for section in config.sections:
      if (spec.name, section) in done:
        continue
      start = time.perf_counter()
      record = dict(model=spec.name, section=section)
      try:
        record.update(status="ok", **SECTION_FNS[section](ctx))
      except Skip as why:
        record.update(status="skipped", reason=str(why))
      except SectionError as e:
        record.update(status="error", error=str(e), **e.fields)
      except Exception as e:  # noqa: BLE001 (a failing section is recorded; the others still run)
        record.update(status="error", error=_one_line(e))
      record["wall_time_s"] = time.perf_counter() - start
      store.append(record)
      if verbose:
        note = record.get("reason") or record.get("error") or ""
        print(f"  {spec.name} / {section}: {record['status']} in {record['wall_time_s']:.1f} s"
              + (f" ({note})" if note else ""), flush=True)
  return store.records()


def run(config: ReportConfig, workdir, *, overwrite_config: bool = False) -> list[dict]:
  """``run_report(config.models, config, workdir)``: the runner of ``python -m experiments.report``."""
  if not config.models:
    raise ValueError("give at least one --model pkg.module:function")
  return run_report(list(config.models), config, workdir, overwrite_config=overwrite_config)


def _split_argv(argv):
  """Pulls the ``--model X`` / ``--model=X`` arguments out of argv; returns (models, the rest)."""
  models, rest, it = [], [], iter(argv)
  for arg in it:
    if arg == "--model":
      value = next(it, None)
      if value is None:
        raise ValueError("--model needs a value pkg.module:function")
      models.append(value)
    elif arg.startswith("--model="):
      models.append(arg.split("=", 1)[1])
    else:
      rest.append(arg)
  return models, rest


def main(argv=None) -> None:
  """``python -m experiments.report``: the common experiment command line plus repeatable ``--model``."""
  from experiments.core import cli
  from experiments.report import SPEC
  argv = sys.argv[1:] if argv is None else list(argv)
  with cli.user_errors():
    models, rest = _split_argv(argv)
  config, args = cli.cli(SPEC, rest)
  if models:
    config = dataclasses.replace(config, models=tuple(models))
  with cli.user_errors():
    SPEC.run(config, args.workdir, overwrite_config=args.overwrite_config)
    SPEC.write_report(args.workdir)
  print(f"wrote results.jsonl, plots and summary.md to {args.workdir}")
