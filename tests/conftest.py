"""Strict JAX settings for the whole suite (rank promotion raises) and the opt-in full-data directory."""
import os

import jax
import pytest

import ntk._nt_compat  # noqa: F401  (before any test module imports neural_tangents)

jax.config.update("jax_numpy_rank_promotion", "raise")


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
  """Drops JAX's compiled programs after each test module. XLA:CPU maps memory for every executable it
  compiles; kept for the whole suite, jaxlib 0.10.2 reached the kernel's vm.max_map_count (65,530) about
  700 tests in and segfaulted inside the compiler (measured: 30,000 maps at 40 % of the suite)."""
  yield
  jax.clear_caches()


@pytest.fixture(scope="session")
def full_data_dir():
  """The directory of the full data files named by ATTN_DATA_DIR, or skip."""
  path = os.environ.get("ATTN_DATA_DIR")
  if not path or not os.path.isdir(path):
    pytest.skip("full-data test: set ATTN_DATA_DIR to a directory with the MNIST / Fashion-MNIST / "
                "CIFAR-10 files (layout in docs/data.md#directory-layouts) to run it")
  return path
