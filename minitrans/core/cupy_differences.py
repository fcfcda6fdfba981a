"""What CuPy does not have, or does otherwise than NumPy, so that the strict
backend (``minitrans.core.strict``) refuses it as CuPy would: the NumPy
names CuPy lacks (module functions, ``Generator`` methods and ndarray
attributes, read from CuPy 14.2 against NumPy 2.4.6), and the operations
whose results differ (an assignment to one element twice, a cast of floats
that C's casts give otherwise).
"""

import numpy as np

NOT_IN_CUPY = frozenset("""
    asmatrix block bmat busday_count busday_offset datetime_as_string datetime_data einsum_path
    errstate frompyfunc fromregex geomspace get_include getbufsize geterr geterrcall
    histogram_bin_edges info insert is_busday isnat matvec nanpercentile nanquantile nested_iters
    polyder polydiv polyint setbufsize seterr seterrcall show_runtime spacing test unstack vecdot
    vecmat""".split())
GENERATOR_NOT_IN_CUPY = frozenset("""
    bit_generator bytes choice gumbel laplace logistic lognormal multinomial
    multivariate_hypergeometric multivariate_normal negative_binomial noncentral_chisquare
    noncentral_f normal pareto permutation permuted rayleigh shuffle spawn standard_cauchy
    standard_t triangular vonmises wald weibull zipf""".split())
NDARRAY_NOT_IN_CUPY = frozenset("ctypes getfield resize setfield setflags to_device".split())


def not_in_cupy(owner, name):
    """The AttributeError CuPy raises for ``owner.name``."""
    return AttributeError(
        f"{owner} has no attribute {name!r} on CuPy, so the strict backend refuses it too"
    )


def refuse_repeated_targets(data, key):
    """x[ids] = v with an id twice: NumPy keeps the last value, CuPy any one."""
    parts = key if isinstance(key, tuple) else (key,)
    if not any(isinstance(p, np.ndarray) and p.dtype.kind in "iu" for p in parts):
        return
    hits = np.zeros(data.shape, dtype=np.int64)
    np.add.at(hits, key, 1)
    if hits.max(initial=0) > 1:
        raise TypeError("an assignment writes one element twice (a repeated index): CuPy keeps "
                        "any one of the values, NumPy the last; use xp.add.at to add them up")


def refuse_cast_cupy_does_otherwise(data, dtype):
    """Floats to integers: NaN, infinity and values out of the integer's range
    (negative ones to unsigned) come out differently on CuPy (CUDA's C casts)."""
    if data.dtype.kind != "f" or dtype.kind not in "iu" or data.size == 0:
        return
    info = np.iinfo(dtype)
    if not (np.isfinite(data).all() and data.min() >= info.min and data.max() <= info.max):
        raise TypeError(f"a cast of floats to {dtype} with NaN, infinity or values outside "
                        f"[{info.min}, {info.max}]: CuPy gives other integers than NumPy")
