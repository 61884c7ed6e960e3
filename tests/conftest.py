"""Strict JAX settings for the whole suite (rank promotion raises), one persistent compilation cache per test
run, and the opt-in full-data directory."""
import os
import shutil
import tempfile
import uuid
from pathlib import Path

import jax
import pytest

import ntk._nt_compat  # noqa: F401  (before any test module imports neural_tangents)

jax.config.update("jax_numpy_rank_promotion", "raise")

CACHE_PREFIX = "attn-jax-cache-"


def _run_cache_dir() -> Path:
  """This test run's compilation cache, under the system's temporary directory: one directory per run, named by
  ATTN_TEST_RUN_ID, which the first process sets and xdist's workers inherit."""
  return Path(tempfile.gettempdir()) / f"{CACHE_PREFIX}{os.environ.setdefault('ATTN_TEST_RUN_ID', uuid.uuid4().hex)}"


def pytest_configure(config):
  """A JAX persistent compilation cache for this run (unless JAX_COMPILATION_CACHE_DIR names one): the suite's
  modules compile many identical programs (each module's are dropped after it, ``_release_compiled_programs``),
  and a program compiled by one module or worker is read back by the next instead of compiled again. Its key
  includes XLA_FLAGS, so a run under other numerics never reads another's programs. Removed at the end of the
  run by the process that made the run id (the xdist controller, or pytest alone)."""
  if os.environ.get("JAX_COMPILATION_CACHE_DIR"):
    return
  jax.config.update("jax_compilation_cache_dir", str(_run_cache_dir()))
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
  jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def pytest_unconfigure(config):
  if not os.environ.get("JAX_COMPILATION_CACHE_DIR") and not hasattr(config, "workerinput"):
    shutil.rmtree(_run_cache_dir(), ignore_errors=True)


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
