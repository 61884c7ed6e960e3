"""Real image data (MNIST, Fashion-MNIST, CIFAR-10) as numpy arrays, verified against known hashes.

``load_dataset(name, split, source=...)`` is the one entry point; by default it reads the small real
subsets shipped in ``experiments/data/embedded/`` (see its README.md and MANIFEST.json). Importing this
package does not import TensorFlow.
"""
from experiments.data.catalog import CIFAR_NPZ_TEST_SIZE, DATASETS, DatasetSpec, get_spec
from experiments.data.formats import DatasetFileError, DatasetFileNotFoundError
from experiments.data.loader import (
    BINARY_TASKS,
    DATA_DIR_ENV,
    Split,
    SplitInfo,
    class_balanced_block_indices,
    class_balanced_indices,
    load_binary_task,
    load_dataset,
)
from experiments.data.sources import PartialTestSetWarning

__all__ = [
    "BINARY_TASKS",
    "CIFAR_NPZ_TEST_SIZE",
    "DATASETS",
    "DATA_DIR_ENV",
    "DatasetFileError",
    "DatasetFileNotFoundError",
    "DatasetSpec",
    "PartialTestSetWarning",
    "Split",
    "SplitInfo",
    "class_balanced_block_indices",
    "class_balanced_indices",
    "get_spec",
    "load_binary_task",
    "load_dataset",
]
