"""Everything but the neural-tangents import hook is in pyproject.toml.

The hook (site_hook/attention_fragility_nt_hook.py, which says what it does, and its .pth) goes into
site-packages as data files, so that a bare ``import neural_tangents`` works. Data files are installed
relative to the environment's data directory (the venv's prefix); site-packages is found relative to it
here, by the interpreter running the build, which is the one being installed into.

setuptools' editable install (``pip install -e``, PEP 660) runs ``install_data`` only where the
distribution has a ``has_data`` method (setuptools 64–84 ask for that name; distutils' is
``has_data_files``), so ``_Distribution`` provides it. Without it an editable install silently skips the
hook; tests/test_nt_compat.py notices.
"""
import os
import sysconfig

from setuptools import setup
from setuptools.dist import Distribution

_SITE_PACKAGES = os.path.relpath(sysconfig.get_path("purelib"), sysconfig.get_path("data"))


class _Distribution(Distribution):

  def has_data(self) -> bool:
    return self.has_data_files()


setup(distclass=_Distribution,
      data_files=[(_SITE_PACKAGES, ["site_hook/attention_fragility_nt_hook.py",
                                    "site_hook/attention_fragility_nt_hook.pth"])])
