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


@pytest.mark.slow
def test_the_committed_paper_grid_summary_is_what_the_committed_records_rebuild(tmp_path, monkeypatch):
  """docs/paper_grid_summary.md (quoted by the README and docs/claims.md) is the claims job's table rebuilt from
  results/paper_grid/flip_rate/mnist alone, by the command on its first line: a hand edit, a stale table after
  a change of the row builders, or records changed after the table was made fail here."""
  from pathlib import Path

  from experiments.claims.job import main as claims_main
  root = Path(__file__).resolve().parents[2]
  committed = (root / "docs" / "paper_grid_summary.md").read_text().splitlines()
  made_by = committed[0]
  assert "--from results/paper_grid/flip_rate/mnist --no_run" in made_by and "--workdir runs/paper_rows" in made_by
  records = root / "results" / "paper_grid" / "flip_rate" / "mnist"
  (tmp_path / "results" / "paper_grid" / "flip_rate").mkdir(parents=True)
  (tmp_path / "results" / "paper_grid" / "flip_rate" / "mnist").symlink_to(records)
  monkeypatch.chdir(tmp_path)   # the table names its workdir and sources as the command on its first line does
  claims_main(["--workdir", "runs/paper_rows", "--from", "results/paper_grid/flip_rate/mnist", "--no_run"])
  rebuilt = (tmp_path / "runs" / "paper_rows" / "summary.md").read_text().splitlines()
  assert rebuilt == committed[1:], "docs/paper_grid_summary.md is not the rebuild of the committed records: rerun " \
                                   "the command on its first line and commit its summary.md"
