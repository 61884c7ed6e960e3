"""``python -m experiments.report``: see ``experiments.report.run.main`` (the experiment command line plus
``--model``)."""
from experiments.report.run import main

if __name__ == "__main__":
  main()
