"""The claims job (``python -m experiments.claims``): every registered experiment's claim rows with 95 %
intervals and verdicts, their protocol variants, and the stability pass."""
