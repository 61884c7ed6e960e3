"""What the project knows about each data set: names, classes, file layout, reference hashes.

Facts here come from ``docs/data.md`` (file names, sizes, CIFAR npz hashes, licences) and
from the official data set pages (class names, download URLs).
"""
from __future__ import annotations

from typing import NamedTuple

SPLITS = ("train", "test")


class DatasetSpec(NamedTuple):
  """Static description of one data set.

  Attributes:
    name: canonical name, also the TFDS name and the sub-directory of a data dir.
    image_shape: (height, width, channels) of one image.
    class_names: label i is class_names[i].
    num_examples: official split sizes, {"train": n, "test": n}.
    hint: how to get the files, quoted in error messages.
  """
  name: str
  image_shape: tuple[int, int, int]
  class_names: tuple[str, ...]
  num_examples: dict[str, int]
  hint: str

  @property
  def num_classes(self) -> int:
    return len(self.class_names)


DATASETS: dict[str, DatasetSpec] = {
    "mnist": DatasetSpec(
        name="mnist",
        image_shape=(28, 28, 1),
        class_names=tuple(str(d) for d in range(10)),
        num_examples={"train": 60000, "test": 10000},
        hint=("the four IDX files from https://ossci-datasets.s3.amazonaws.com/mnist/ (mirror of "
              "http://yann.lecun.com/exdb/mnist/) into DIR/mnist/, or use source='tfds' "
              "(tfds.load('mnist'))"),
    ),
    "fashion_mnist": DatasetSpec(
        name="fashion_mnist",
        image_shape=(28, 28, 1),
        class_names=("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
                     "Sneaker", "Bag", "Ankle boot"),
        num_examples={"train": 60000, "test": 10000},
        hint=("the four IDX files from https://github.com/zalandoresearch/fashion-mnist (or the Debian "
              "package dataset-fashion-mnist) into DIR/fashion_mnist/, or use source='tfds' "
              "(tfds.load('fashion_mnist'))"),
    ),
    "cifar10": DatasetSpec(
        name="cifar10",
        image_shape=(32, 32, 3),
        class_names=("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship",
                     "truck"),
        num_examples={"train": 50000, "test": 10000},
        hint=("extract https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz into DIR/cifar10/ "
              "(giving DIR/cifar10/cifar-10-batches-py/), or use source='tfds' (tfds.load('cifar10'))"),
    ),
}

ALIASES: dict[str, str] = {
    "mnist": "mnist",
    "fashion_mnist": "fashion_mnist", "fashion-mnist": "fashion_mnist", "fmnist": "fashion_mnist",
    "fashionmnist": "fashion_mnist",
    "cifar10": "cifar10", "cifar-10": "cifar10", "cifar_10": "cifar10",
}


def get_spec(name: str) -> DatasetSpec:
  """Returns the spec for a data set name or alias (case-insensitive).

  Raises:
    ValueError: naming the valid names and aliases, if ``name`` is unknown.
  """
  key = ALIASES.get(str(name).lower())
  if key is None:
    raise ValueError(f"unknown dataset name {name!r}; valid names: {sorted(DATASETS)} "
                     f"(aliases: {sorted(set(ALIASES) - set(DATASETS))})")
  return DATASETS[key]


# IDX files of MNIST and Fashion-MNIST: split -> (images, labels) file names inside DIR/<name>/.
IDX_FILES: dict[str, tuple[str, str]] = {
    "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
    "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
}

# SHA-256 of the DECOMPRESSED IDX files (header + payload), so that the official gzip files and
# re-gzipped copies of the same bytes (Debian's Fashion-MNIST) both verify. Computed once from the
# files described in docs/data.md#full-data-files (whose gz MD5s equal the official ones) with
#   hashlib.sha256(gzip.open(path).read()).hexdigest()
IDX_PAYLOAD_SHA256: dict[tuple[str, str], str] = {
    ("mnist", "train-images-idx3-ubyte.gz"):
        "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
    ("mnist", "train-labels-idx1-ubyte.gz"):
        "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
    ("mnist", "t10k-images-idx3-ubyte.gz"):
        "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
    ("mnist", "t10k-labels-idx1-ubyte.gz"):
        "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
    ("fashion_mnist", "train-images-idx3-ubyte.gz"):
        "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",
    ("fashion_mnist", "train-labels-idx1-ubyte.gz"):
        "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9",
    ("fashion_mnist", "t10k-images-idx3-ubyte.gz"):
        "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b",
    ("fashion_mnist", "t10k-labels-idx1-ubyte.gz"):
        "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34",
}

# CIFAR-10 official python batches inside DIR/cifar10/ (or DIR/) : split -> batch file names.
CIFAR_BATCH_DIR = "cifar-10-batches-py"
CIFAR_BATCHES: dict[str, tuple[str, ...]] = {
    "train": tuple(f"data_batch_{i}" for i in range(1, 6)),
    "test": ("test_batch",),
}

# CIFAR-10 npz layout (docs/data.md#cifar-10): split -> ((file, sha256, rows), ...), arrays
# x_<split> uint8 [rows, 32, 32, 3] and y_<split> uint8 [rows]. Hashes: docs/data.md#checksums.
# The test file holds only the first 1,000 of the 10,000 official test images.
CIFAR_NPZ: dict[str, tuple[tuple[str, str, int], ...]] = {
    "train": (
        ("cifar10_train_part0.npz",
         "dd66c0c520a3731ba2d8090cf9858c44dd898c48cad2ae8676b990cf068b1a0d", 25000),
        ("cifar10_train_part1.npz",
         "a41872752ec955c14111ee945eb9e7f25854135c46d7b26913f5862d871b4e61", 25000),
    ),
    "test": (
        ("cifar10_test.npz",
         "3fa345f7409d7c3f5797dd7429da00fbf3f337fd619de9119ccb09a58bc74b40", 1000),
    ),
}
CIFAR_NPZ_TEST_SIZE = 1000

# Embedded subsets shipped in experiments/data/embedded/: name -> {split: examples}.
EMBEDDED_SIZES: dict[str, dict[str, int]] = {
    "mnist": {"train": 2000, "test": 500},
    "fashion_mnist": {"train": 2000, "test": 500},
    "cifar10": {"train": 1500, "test": 500},
}
EMBEDDED_HINT = ("restore experiments/data/embedded/ from git, or rebuild it from the full files with "
                 "`python -m experiments.data.make_embedded --data_dir DIR`")
