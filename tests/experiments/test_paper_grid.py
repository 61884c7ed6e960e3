"""experiments.paper_grid: the core paper's grids under its own recipe (arXiv 2603.13085 §5)."""
import pytest

from experiments.core.config import PAPER_TRAIN
from experiments.paper_grid.__main__ import grids, main


def test_every_grid_is_the_papers_recipe_at_n_1000_with_10_seeds_on_the_full_files():
  table = grids()
  assert sorted(table) == ["adversarial", "flip_rate", "sharpness", "width_sweep"]
  assert [w for w, _, _ in table["flip_rate"]] == ["flip_rate/mnist", "flip_rate/cifar10", "flip_rate/mnist_3v8",
                                                   "flip_rate/cifar_cars_planes"]
  for name, runs in table.items():
    for _, _, config in runs:
      config.validate()
      train = config.converged.train if name == "width_sweep" else config.train
      assert train == PAPER_TRAIN and (train.learning_rates, train.l2, train.batch_size, train.max_epochs,
                                       train.loss_target) == ((1e-3,), 1e-3, 128, 500, 0.0)
      assert config.data.n_train == 1000 and config.data.source == "dir" and config.data.dir is None
      assert len(config.converged.seeds if name == "width_sweep" else config.seeds) == 10
  sweep = table["width_sweep"][0][2]
  assert sweep.converged.loss == "ce" and sweep.converged.linearized and sweep.widths[-1] == 4096
  assert sweep.datasets[0] == "cifar10"  # the paper's NTK-distance claim is stated on CIFAR-10: first
  (_, _, at), = table["adversarial"]
  assert at.adversarial_training and at.at_eps == 0.3
  assert all(c.extra_kernels == ("infinite",) and c.sign_randomized_control for _, _, c in table["flip_rate"])


def test_without_the_data_files_it_stops_before_any_work(tmp_path, monkeypatch, capsys):
  monkeypatch.delenv("ATTN_DATA_DIR", raising=False)
  assert main(["sharpness", "--root", str(tmp_path / "r")]) == 2
  assert "ATTN_DATA_DIR" in capsys.readouterr().err and not (tmp_path / "r").exists()


def test_an_unknown_or_abbreviated_grid_is_refused(capsys):
  for argv in (["width"], ["sharpness", "--ro", "x"]):
    with pytest.raises(SystemExit):
      main(argv)
  assert "invalid choice" in capsys.readouterr().err
