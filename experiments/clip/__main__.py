"""``python -m experiments.clip``: the command line of ``experiments.core.cli.experiment_main``."""
from experiments.core.cli import experiment_main
from experiments.clip import SPEC

if __name__ == "__main__":
  experiment_main(SPEC)
