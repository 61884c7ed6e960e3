"""``python -m experiments.claims``: see ``experiments.claims.job``."""
from experiments.claims.job import main

if __name__ == "__main__":
  main()
