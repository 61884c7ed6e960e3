"""One small setting per experiment, for a first try: each runs in seconds to about two minutes on 2 CPU cores on the
embedded subsets, writes the experiment's usual workdir (config.json, results.jsonl, summary.md, plots), and
is far too small to read a verdict from.

  python -m experiments.first_try [NAME ...] [--root runs/first_try]

``SETTINGS`` holds each one's ``field=value`` overrides: the same run is
``python -m experiments.<NAME> --workdir DIR <overrides>``.
"""
from __future__ import annotations

SETTINGS: dict[str, tuple[str, ...]] = {
    "width_sweep": ("datasets=mnist", "widths=16,64", "seeds=0", "data.n_train=64", "data.n_test=16",
                    "train.max_width=64", "train.steps=20", "converged.seeds=0", "converged.train.max_epochs=20"),
    "cubing": ("datasets=mnist", "ns=30,60", "seeds=0"),
    "flip_rate": ("widths=64", "seeds=0", "eps=0,0.3", "data.n_train=40", "data.n_test=10",
                  "train.max_epochs=20", "train.check_every=10", "pgd_steps=5", "mim_steps=3"),
    "landscape": ("widths=16", "seeds=0", "data.n_train=32", "readouts=fixed", "train.max_epochs=20",
                  "train.check_every=10", "top_k=1", "lanczos_iters=4", "grid_1d=3", "grid_2d=3"),
    "dual_implications": ("datasets=mnist", "data.n_train=24", "data.n_test=12", "targets=top,bottom", "draws=0,1",
                          "k=3", "seeds=0", "network_seeds=0", "width=16", "train.max_epochs=5"),
    "diff_attention": ("dataset=mnist", "data.n_train=64", "data.n_test=16", "patch_size=7", "dim=16", "num_heads=2",
                       "train.epochs=1", "train.batch_size=32", "depths=1", "single_layer_lambda_inits=",
                       "eps_255=1,8", "crossover_eps_255=1,8", "pgd_steps=2", "apgd_steps=3", "cw_depths=",
                       "lipschitz_samples=4", "alignment_samples=2", "alignment_chunk=392"),
    "clip": ("data.n_train=64", "data.n_test=12", "patch_size=8", "dim=16", "num_heads=2", "text_dim=16",
             "text_heads=2", "embed_dim=8", "train.epochs=1", "train.batch_size=32", "seeds=1", "eps_255=8",
             "patch_sizes=4,8", "pgd_steps=2", "patch_steps=2"),
    "train_vit": ("models=vit", "depths=1", "lambda_inits=0.8", "dim=8", "num_heads=2", "patch_size=8",
                  "depth1_seeds=1", "data.n_train=128", "data.n_test=64", "train.epochs=1", "train.batch_size=32",
                  "train.warmup_epochs=0"),
    "certify": ("datasets=mnist", "attention_bounds=0.25,1", "epsilons=0.05", "data.n_train=40", "data.n_test=10",
                "validation_fraction=0.25", "train.epochs=1", "train.batch_size=10", "depth=1", "dim=8",
                "num_heads=1", "sll_hidden=8", "power_iters=5", "chunk=10", "pgd.steps=3", "tightness_samples=2",
                "layer_pgd.steps=5", "layer_pgd.restarts=1"),
}
