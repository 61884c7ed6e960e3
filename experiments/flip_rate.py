"""Influence malleability: how often NTK influence flips sign when the training data is attacked.

Usage:
  python -m experiments.flip_rate --workdir runs/flip_rate [--full] [field=value ...]

For each task (10-class MNIST / Fashion-MNIST / CIFAR-10, binary MNIST 3-vs-8 and CIFAR cars-vs-planes),
model (2L-ReLU, MLP-Attn), width and seed:
  1. train the 2-layer ReLU network (fixed ±1 readout) on its features with Adam (the paper's recipe:
     CE for 10 classes, MSE for binary; see ``ntk.training.train_adam``);
  2. NTK leave-one-out influence of every training image on the test loss, with the empirical NTK at the
     trained parameters (``influence.ntk_loo_influence``; I_j > 0 = helpful; λ = 1e-3·tr(K)/n);
  3. attack every training row against its own loss with the other rows held fixed (FGSM, PGD-L∞, MIM, and a
     random-sign control) at each ε, re-featurise all rows together (the attention transform sees the whole
     perturbed set; test rows are featurised against it), recompute kernel and influence with the
     parameters fixed, and record the flip rate of the top-10 % influential samples, Spearman ρ, and the
     measured mean ‖δ‖∞/ε. ε = 0 is run as a control (it must give exactly 0 flips).
Optionally (``adversarial_training=true``) the network is first trained adversarially (PGD on its rows).

Quick config: embedded MNIST, n = 256 train / 100 test, width 1024, 3 seeds, ε ∈ {0, 0.1, 0.2, 0.3, 0.5}
(~3 minutes on 2 CPU cores). ``--full``: every task, widths 256/1024/4096, 5 seeds, full data files.
Writes config.json, results.jsonl, flip_rate_vs_eps.png, flip_rate_vs_width.png and summary.md.
Source: arXiv 2603.13085 §5; REFERENCE §1 (paper's numbers in ``PAPER_FLIP_RATES``).
"""
from __future__ import annotations

import dataclasses
import time
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

import attacks
import ntk
from influence import flip_rate, ntk_loo_influence
from ntk.training import train_adam
from experiments import config as config_lib
from experiments.data import BINARY_TASKS, load_dataset
from experiments.workdir import Workdir

KEY_FIELDS = ("task", "model", "width", "seed", "adversarial_training", "attack", "eps")
ATTACKS = ("fgsm", "pgd", "mim", "random_sign")


@dataclasses.dataclass(frozen=True)
class FlipRateConfig:
  """tasks: data set names or BINARY_TASKS keys; models; widths; seeds (init and attack randomness);
  eps: L∞ budgets on the [0, 1] pixel scale (0 = control); attacks: among ATTACKS; n_train, n_test,
  data_source, data_dir, data_seed: data; epochs, learning_rate, weight_decay, batch_size: Adam training
  (the paper's L2 = 1e-3 drives these NTK-parameterised nets to chance, so the default is 0);
  pgd_steps and pgd_alpha (None: α = ε/30, which is Madry et al.'s α = 0.01 for 40 steps at ε = 0.3),
  mim_steps (α = ε/steps, Dong et al.); top_fraction τ; adversarial_training with at_eps, at_rounds,
  at_epochs_per_round."""
  tasks: tuple[str, ...] = ("mnist",)
  models: tuple[str, ...] = ("relu", "mlp_attn")
  widths: tuple[int, ...] = (1024,)
  seeds: tuple[int, ...] = (0, 1, 2)
  eps: tuple[float, ...] = (0.0, 0.1, 0.2, 0.3, 0.5)
  attacks: tuple[str, ...] = ATTACKS
  n_train: int = 256
  n_test: int = 100
  data_source: str = "embedded"
  data_dir: Optional[str] = None
  data_seed: int = 0
  epochs: int = 500
  learning_rate: float = 1e-3
  weight_decay: float = 0.0
  batch_size: int = 128
  pgd_steps: int = 40
  pgd_alpha: Optional[float] = None
  mim_steps: int = 10
  top_fraction: float = 0.1
  adversarial_training: bool = False
  at_eps: float = 0.3
  at_rounds: int = 10
  at_epochs_per_round: int = 50

  def validate(self) -> None:
    config_lib.check_common(self, dataset_fields=("tasks",), binary_tasks=True, finite=("eps",),
                            nonempty=("tasks", "models", "widths", "seeds", "eps", "attacks"))
    if any(not 0 <= e <= 1 for e in self.eps):
      raise ValueError(f"eps must be in [0, 1] (L∞ on the [0, 1] pixel scale), got {self.eps}")
    if not 0 <= self.at_eps <= 1:
      raise ValueError(f"at_eps must be in [0, 1], got {self.at_eps}")
    bad = [a for a in self.attacks if a not in ATTACKS]
    if bad:
      raise ValueError(f"attacks must be among {ATTACKS}, got {bad}")
    bad = [m for m in self.models if m not in ntk.MODEL_NAMES]
    if bad:
      raise ValueError(f"models must be among {ntk.MODEL_NAMES}, got {bad}")
    if any(w < 1 for w in self.widths) or self.n_train < 10 or self.n_test < 1:
      raise ValueError("widths must be ≥ 1, n_train ≥ 10 and n_test ≥ 1")
    if not 0 < self.top_fraction <= 1:
      raise ValueError(f"top_fraction must be in (0, 1], got {self.top_fraction}")
    for name in ("epochs", "batch_size", "pgd_steps", "mim_steps", "at_rounds", "at_epochs_per_round"):
      if getattr(self, name) < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {getattr(self, name)}")
    if not self.learning_rate > 0 or not self.weight_decay >= 0:
      raise ValueError(f"learning_rate must be > 0 and weight_decay >= 0, got {self.learning_rate}, "
                       f"{self.weight_decay}")
    if self.pgd_alpha is not None and not 0 < self.pgd_alpha <= 1:
      raise ValueError(f"pgd_alpha must be in (0, 1] or None (α = ε/30), got {self.pgd_alpha}")


def get_config(full: bool = False) -> FlipRateConfig:
  if not full:
    return FlipRateConfig()
  return FlipRateConfig(tasks=("mnist", "fashion_mnist", "cifar10", "mnist_3v8", "cifar_cars_planes"),
                        widths=(256, 1024, 4096), seeds=(0, 1, 2, 3, 4), n_train=1000, n_test=500,
                        data_source="dir")


def _load(config: FlipRateConfig, task: str):
  name, classes = BINARY_TASKS.get(task, (task, None))
  kw = dict(source=config.data_source, data_dir=config.data_dir, flatten=True, seed=config.data_seed,
            classes=classes)
  return (load_dataset(name, "train", n=config.n_train, **kw),
          load_dataset(name, "test", n=config.n_test, **kw))


def _row_logits(apply_fn, model_name, params, x_clean, gram, x_rows):
  return apply_fn(params, ntk.row_replaced_features(model_name, x_rows, x_clean, gram))


def perturb_rows(attack: str, logits_fn, x, y, *, eps: float, key, config: FlipRateConfig):
  """Attacks every row of x (per-row logits_fn); returns x_adv [n, d] in [0, 1]."""
  if attack == "random_sign":
    signs = jnp.sign(jax.random.normal(key, x.shape))
    return jnp.clip(x + eps * signs, 0.0, 1.0)
  if attack == "fgsm":
    return attacks.fgsm(logits_fn, x, y, eps=eps).x_adv
  if attack == "pgd":
    alpha = config.pgd_alpha if config.pgd_alpha is not None else eps / 30
    return attacks.pgd_linf(logits_fn, x, y, eps=eps, alpha=alpha, steps=config.pgd_steps, key=key).x_adv
  if attack == "mim":
    return attacks.mim(logits_fn, x, y, eps=eps, steps=config.mim_steps).x_adv
  raise ValueError(f"attack must be one of {ATTACKS}, got {attack!r}")


def _influence(model, params, f_tr, f_te, y_train, y_test):
  """NTK-LOO influence from feature rows (train [n, d], test [t, d]) at the fixed parameters."""
  k_tr = np.asarray(ntk.two_layer_relu_ntk(model, params, f_tr), np.float64)
  k_te = np.asarray(ntk.two_layer_relu_ntk(model, params, f_te, f_tr), np.float64)
  return ntk_loo_influence(k_tr, k_te, y_train, y_test)


def train_model(config, model, model_name, x, y_onehot, n_classes, key):
  """Trains the 2-layer network on the features of x as configured (Adam, optionally PGD adversarial
  training); returns params. CE for > 2 classes, MSE for binary tasks (the paper's choice)."""
  loss = "ce" if n_classes > 2 else "mse"
  init_key, train_key, at_key = jax.random.split(key, 3)
  feats, _ = ntk.model_features(model_name, x)
  _, params = model.init_fn(init_key, feats.shape)
  kw = dict(key=train_key, loss=loss, learning_rate=config.learning_rate, weight_decay=config.weight_decay,
            batch_size=config.batch_size)
  if not config.adversarial_training:
    return train_adam(model.apply_fn, params, feats, y_onehot, epochs=config.epochs, **kw)
  # PGD adversarial training (Madry et al. 2018): alternate PGD on every row against the current network
  # with Adam epochs on the adversarial rows' features.
  params = train_adam(model.apply_fn, params, feats, y_onehot, epochs=config.at_epochs_per_round, **kw)
  gram = jnp.asarray(x).T @ jnp.asarray(x)
  labels = jnp.argmax(y_onehot, axis=1)
  for r in range(config.at_rounds):
    fn = jax.tree_util.Partial(_row_logits, model.apply_fn, model_name, params, jnp.asarray(x), gram)
    x_adv = perturb_rows("pgd", fn, jnp.asarray(x), labels, eps=config.at_eps,
                         key=jax.random.fold_in(at_key, r), config=config)
    adv_feats = ntk.row_replaced_features(model_name, x_adv, x, gram)
    kw["key"] = jax.random.fold_in(train_key, r + 1)
    params = train_adam(model.apply_fn, params, adv_feats, y_onehot, epochs=config.at_epochs_per_round, **kw)
  return params


def _points(config):
  for task in config.tasks:
    for model_name in config.models:
      for width in config.widths:
        for seed in config.seeds:
          yield task, model_name, width, seed


def run(config: FlipRateConfig, workdir, *, overwrite_config: bool = False) -> list[dict]:
  """Runs (or resumes) the flip-rate experiment; returns all records."""
  config.validate()
  wd = Workdir(workdir, KEY_FIELDS, config, overwrite_config=overwrite_config)
  done = wd.done()
  at = config.adversarial_training
  groups = [g for g in _points(config)
            if any((*g, at, a, e) not in done for a in config.attacks for e in config.eps)]
  data = {}
  bar = tqdm(total=len(groups) * len(config.attacks) * len(config.eps), desc="flip rate", unit="point")
  for task, model_name, width, seed in groups:
    if task not in data:
      data[task] = _load(config, task)
    train, test = data[task]
    n_classes = len(train.info.class_ids)
    y_tr = np.eye(n_classes)[train.y]
    y_te = np.eye(n_classes)[test.y]
    start = time.perf_counter()
    model = ntk.two_layer_relu(width, train.x.shape[1], out_dim=n_classes)
    key = jax.random.PRNGKey(seed)
    params = train_model(config, model, model_name, train.x, y_tr.astype(np.float32), n_classes,
                         jax.random.fold_in(key, 0))
    f_tr, f_te = ntk.model_features(model_name, train.x, test.x)
    before = _influence(model, params, f_tr, f_te, y_tr, y_te)
    train_acc = float(np.mean(np.argmax(np.asarray(model.apply_fn(params, f_tr)), 1) == train.y))
    test_acc = float(np.mean(np.argmax(np.asarray(model.apply_fn(params, f_te)), 1) == test.y))
    setup_s = time.perf_counter() - start
    x = jnp.asarray(train.x)
    gram = x.T @ x
    logits_fn = jax.tree_util.Partial(_row_logits, model.apply_fn, model_name, params, x, gram)
    for a_i, attack in enumerate(config.attacks):
      for eps in config.eps:
        if (task, model_name, width, seed, at, attack, eps) in done:
          bar.update()
          continue
        t0 = time.perf_counter()
        attack_key = jax.random.fold_in(jax.random.fold_in(key, 1 + a_i), int(round(eps * 1e6)))
        x_adv = np.asarray(perturb_rows(attack, logits_fn, x, jnp.asarray(train.y), eps=eps, key=attack_key,
                                        config=config))
        linf = np.abs(x_adv - train.x).max(axis=1)
        after = _influence(model, params, *ntk.model_features(model_name, x_adv, test.x), y_tr, y_te)
        fr = flip_rate(before.scores, after.scores, config.top_fraction)
        adv_acc = float(np.mean(np.argmax(np.asarray(logits_fn(jnp.asarray(x_adv))), 1) == train.y))
        wd.append(dict(task=task, model=model_name, width=width, seed=seed, adversarial_training=at,
                       attack=attack, eps=eps, flip_rate=fr.rate, n_flipped=fr.n_flipped, n_top=fr.n_top,
                       spearman=fr.spearman, mean_linf_over_eps=float(np.mean(linf) / eps) if eps else 0.0,
                       train_accuracy=train_acc, test_accuracy=test_acc, attacked_row_accuracy=adv_acc,
                       ridge=before.ridge, n_train=len(train.y), n_test=len(test.y), n_classes=n_classes,
                       wall_time_s=time.perf_counter() - t0, setup_time_s=setup_s))
        bar.update()
  bar.close()
  return wd.records()


def main(argv=None) -> None:
  config, args = config_lib.cli("Flip rate of NTK influence under attacks on the training data.", get_config,
                                argv)
  with config_lib.user_errors():
    records = run(config, args.workdir, overwrite_config=args.overwrite_config)
  from experiments import flip_rate_report
  flip_rate_report.write_report(args.workdir, records)
  print(f"wrote {len(records)} records, plots and summary.md to {args.workdir}")


if __name__ == "__main__":
  main()
