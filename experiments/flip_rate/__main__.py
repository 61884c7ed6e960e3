"""``python -m experiments.flip_rate``: the command line of ``experiments.core.cli.experiment_main``."""
from experiments.core.cli import experiment_main
from experiments.flip_rate import SPEC

if __name__ == "__main__":
  experiment_main(SPEC)
