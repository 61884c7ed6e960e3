"""The papers' own figures, written once per paper and read by both the claims (``experiments.<name>.claims``)
and the reports (``experiments.<name>.report``): ``influence_malleability`` (arXiv 2603.13085),
``differential_attention`` (arXiv 2510.00517), ``lofast`` (Havens et al., ICML 2024). Targets to compare
with, never used in a computation; transcribed as in docs/theory.md#reported-figures (where the two disagree,
the paper wins)."""
