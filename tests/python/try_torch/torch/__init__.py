"""A stand-in for torch (README.md beside): only what iscope-run --try applies its knobs to."""
from . import backends  # noqa: F401
from . import utils  # noqa: F401

_precision = "highest"
_threads = 4


def set_float32_matmul_precision(p):
    global _precision
    _precision = p


def get_float32_matmul_precision():
    return _precision


def set_num_threads(n):
    global _threads
    _threads = n


def get_num_threads():
    return _threads
