"""A CPU test backend whose arrays behave like GPU arrays towards NumPy.

CuPy arrays live in device memory, so CuPy refuses things that NumPy code
does without a second thought:

* converting a device array to a NumPy array implicitly (``np.asarray(x)``),
* mixing a device array with a NumPy array in one operation (``x + mask``
  where ``mask`` was built with ``numpy``),
* calling ``numpy`` functions on device arrays (``np.add.at(x, ...)``),
* using a device array as an index or a size (``range(x)``: no
  ``__index__``), and copying host data with anything but
  ``asarray``/``array`` (``cupy.ascontiguousarray(host)`` raises),
* NumPy's functions, generator methods and array attributes that CuPy lacks
  (``errstate``, ``setflags``...: the lists of ``core/cupy_differences.py``).

Code that does any of these works on the ``numpy`` backend and breaks on a
GPU. ``StrictArray`` wraps a NumPy array and raises ``TypeError`` (or
``AttributeError``, as CuPy does) in exactly these cases, so the whole test
suite can catch such leaks on a CPU; ``namespace`` plays the part of ``cupy``.

What CuPy allows but makes slow is counted instead, so that tests can hold a
step of training or decoding to a budget: every conversion to a host value
(``float``, ``item``, ``get``, formatting...), a wait for the GPU to finish
all the work queued before it (``host_syncs.count_host_syncs()``), and every
operation that would launch a kernel on a GPU (``launches.count_launches()``).
"""

import types

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin

from minitrans.core import host_syncs, launches
from minitrans.core.cupy_differences import (
    GENERATOR_NOT_IN_CUPY, NDARRAY_NOT_IN_CUPY, NOT_IN_CUPY, not_in_cupy,
    refuse_cast_cupy_does_otherwise, refuse_repeated_targets)
from minitrans.core.float64_guard import FORBIDDING as _float64_forbidden
from minitrans.core.float64_guard import forbid_float64  # noqa: F401  (strict.forbid_float64)

# What copies host data to the "device", like cupy.asarray (ascontiguousarray refuses)
_HOST_TO_DEVICE = {"asarray", "array", "asanyarray"}
_stretches = launches.STRETCHES  # open capture.record_stretch() blocks: empty nearly always


def _host_value(kind, convert):
    """A method of StrictArray giving ``convert(data)``, a host value: a sync."""
    def method(self):
        host_syncs.record(kind)
        return convert(self._data)
    return method


class StrictArray(NDArrayOperatorsMixin):
    """A NumPy array that refuses to mix with plain NumPy arrays."""

    __slots__ = ("_data",)

    def __init__(self, data):
        self._data = data

    # -- what CuPy refuses ------------------------------------------------
    def __array__(self, dtype=None, copy=None):
        raise TypeError("Implicit conversion of a device array to a NumPy array is not allowed; "
                        "use minitrans.to_numpy(x) or x.get() to copy it to the host")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if method not in ("__call__", "reduce", "accumulate", "outer"):
            raise TypeError(f"numpy.{ufunc.__name__}.{method} was called on a device array; "
                            f"use the backend's namespace (xp.{ufunc.__name__}.{method})")
        data = [x._data if type(x) is StrictArray else unwrap(x, f"numpy.{ufunc.__name__}")
                for x in inputs]
        out = kwargs.get("out")
        if out is not None:
            kwargs["out"] = unwrap(out, f"numpy.{ufunc.__name__}")
        kind = ufunc.__name__ if method == "__call__" else f"{ufunc.__name__}.{method}"
        launches.record(kind)
        result = getattr(ufunc, method)(*data, **kwargs)
        if _stretches:  # wrapped first: a scalar result becomes the 0-d array the caller holds
            result = _wrap(result)
            _stretches[-1].add(kind, getattr(ufunc, method), inputs, kwargs, result)
        if isinstance(out, tuple) and len(out) == 1 and type(out[0]) is StrictArray:
            return out[0]  # a += b gives back a itself, as CuPy does (flat views stay held)
        return _wrap(result)

    def __array_function__(self, func, types_, args, kwargs):
        raise TypeError(f"numpy.{func.__name__} was called on a device array; "
                        f"use the backend's namespace (xp.{func.__name__})")

    def __index__(self):
        raise TypeError("a device array cannot be used as an index or a size (CuPy's arrays "
                        "have no __index__); use int(x), which waits for the device, or keep "
                        "the number on the host")

    # -- what CuPy allows, but makes the CPU wait for the GPU -----------------
    def get(self):
        """Copy to a host NumPy array (the CuPy spelling)."""
        host_syncs.record("get")
        return self._data.copy()

    def set(self, host, stream=None):
        """CuPy's ``set``: ``host``, a NumPy array of this dtype and shape, copied in."""
        if (type(host) is not np.ndarray or (host.dtype, host.shape) != (self.dtype, self.shape)
                or not self._data.flags.forc):  # what CuPy refuses, a strided target too
            raise TypeError(f"set: expected a NumPy array of {self.dtype}, shape {self.shape}")
        self._data[...] = host
        _record_copy("set", host, self, (self._data.__setitem__, (..., host), {}))

    item = _host_value("item", np.ndarray.item)
    tolist = _host_value("tolist", np.ndarray.tolist)
    __float__ = _host_value("float", float)
    __int__ = _host_value("int", int)
    __bool__ = _host_value("bool", bool)
    __str__ = _host_value("str", str)

    def __format__(self, spec):
        host_syncs.record("format")
        return format(self._data if self._data.ndim else self._data.item(), spec)

    def __repr__(self):
        host_syncs.record("repr")
        return "strict_" + repr(self._data)

    # -- array behaviour ----------------------------------------------------
    def __getitem__(self, given):
        key = unwrap(given, "indexing")
        parts = key if type(key) is tuple else (key,)  # by index arrays: a gather, else a view
        result = _wrap(self._data[key])
        if launches.counting() and any(isinstance(p, (np.ndarray, list)) for p in parts):
            launches.record("gather")
            if _stretches:
                _stretches[-1].add("gather", self._data.__getitem__, (given,), {}, result)
        return result

    def __setitem__(self, given, value):
        key = unwrap(given, "indexing")
        refuse_repeated_targets(self._data, key)
        self._data[key] = unwrap(value, "assignment")
        launches.record("setitem")
        if _stretches:
            _stretches[-1].add("setitem", self._data.__setitem__, (given, value), {}, self)

    def astype(self, dtype, *args, **kwargs):
        refuse_cast_cupy_does_otherwise(self._data, np.dtype(dtype))
        result = self._data.astype(dtype, *args, **kwargs)
        if result is not self._data:  # copy=False to the same dtype: no copy
            launches.record("astype")
            if _stretches:
                _stretches[-1].add("astype", self._data.astype, (dtype, *args), kwargs, result)
        return _wrap(result)

    # The attributes read on every layer call, answered without __getattr__
    # (a third of the time the strict backend added to a step went there)
    shape = property(lambda self: self._data.shape)
    ndim = property(lambda self: self._data.ndim)
    dtype = property(lambda self: self._data.dtype)
    size = property(lambda self: self._data.size)

    def __getattr__(self, name):
        if name.startswith("__"):  # hides __array_interface__ and friends
            raise AttributeError(name)
        if name in NDARRAY_NOT_IN_CUPY:
            raise not_in_cupy("cupy.ndarray", name)
        attribute = getattr(self._data, name)
        if callable(attribute):
            return _wrap_function(attribute, name, array=self)
        return _wrap(attribute)

    def __len__(self):
        return len(self._data)

    def __iter__(self):
        return (_wrap(row) for row in self._data)

    def __copy__(self, memo=None):  # copy.copy(x) and copy.deepcopy(x): x.copy(), a launch
        return self.copy()

    __deepcopy__ = __copy__

    def __reduce__(self):
        raise TypeError("device arrays cannot be pickled; use minitrans.to_numpy first")


# Values that hold no array, passed through at once
_PLAIN = (int, float, bool, str, type(None), slice, np.dtype, type, type(Ellipsis))


def unwrap(value, where, allow_host=False):
    """Replace StrictArrays by their data; refuse NumPy arrays (unless ``allow_host``)."""
    if type(value) is StrictArray:
        return value._data
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, np.ndarray):
        if allow_host:
            return value
        raise TypeError(f"{where}: got a NumPy array (host memory) where a device array is "
                        "needed; create it with the backend's namespace (xp) or move it with "
                        "minitrans.to_device")
    if isinstance(value, (list, tuple)):
        return type(value)([unwrap(item, where, allow_host) for item in value])
    if isinstance(value, dict):
        return {key: unwrap(item, where, allow_host) for key, item in value.items()}
    return value


def _wrap(value):
    if isinstance(value, np.ndarray):
        if _float64_forbidden and value.dtype == np.float64:
            raise TypeError(f"a float64 array of shape {value.shape} was made inside "
                            "forbid_float64()")
        return StrictArray(value)
    if isinstance(value, np.generic):  # CuPy gives 0-d device arrays, not host scalars
        return _wrap(np.asarray(value))
    if isinstance(value, tuple):
        return tuple([_wrap(item) for item in value])
    if isinstance(value, list):
        return [_wrap(item) for item in value]
    if isinstance(value, np.random.Generator):
        return _Proxy(value, "Generator")
    return value


def _record_copy(kind, source, result, call):
    """After a view-or-copy call (``reshape``, ``asarray``): a launch if it
    copied the device array ``source``, a transfer if ``source`` is host data.
    ``call`` (function, args, kwargs) is kept by a capture.record_stretch()."""
    if type(source) is not StrictArray:
        kind = f"transfer ({kind})"
    elif type(result) is StrictArray and not np.may_share_memory(result._data, source._data):
        kind = f"copy ({kind})"
    else:
        return  # a view: nothing launched
    launches.record(kind)
    if _stretches:
        _stretches[-1].add(kind, *call, result)


def _wrap_function(function, name, allow_host=False, kind=None, array=None):
    """``function`` on device arrays; ``array``: the StrictArray whose method
    it is. Each call that would launch a kernel is recorded as ``kind``."""
    where, kind = f"xp.{name}", kind or name
    launches_one = name not in launches.NO_LAUNCH and name not in launches.VIEW_OR_COPY

    def wrapped(*given, **kwargs):
        source = array if array is not None or not given else given[0]
        args = unwrap(given, where, allow_host)
        data_kwargs = unwrap(kwargs, where, allow_host) if kwargs else kwargs
        result = _wrap(function(*args, **data_kwargs))
        if launches_one:
            launches.record(kind)
            if _stretches:  # array: the one a method that returns None wrote into
                _stretches[-1].add(kind, function, given, kwargs, result, array)
        elif name in launches.VIEW_OR_COPY and launches.counting():
            _record_copy(kind, source, result, (function, given, kwargs))
        return result

    wrapped.__name__ = name
    wrapped.__doc__ = getattr(function, "__doc__", None)
    return wrapped


class _Proxy:
    """Wraps a module or object so that what it returns is on the device."""

    def __init__(self, target, label):
        self._target, self._label = target, label

    def __getattr__(self, name):
        if name in ("_target", "_label"):  # not set yet: a copy under construction
            raise AttributeError(name)
        missing = {"strict": NOT_IN_CUPY, "Generator": GENERATOR_NOT_IN_CUPY}.get(self._label, ())
        if name in missing:
            raise not_in_cupy("cupy" if self._label == "strict" else "cupy's Generator", name)
        # kept on the proxy, so that the next xp.name skips __getattr__
        self.__dict__[name] = value = self._device_version(name, getattr(self._target, name))
        return value

    def _device_version(self, name, attribute):
        if name == "ndarray":
            return StrictArray
        if isinstance(attribute, np.ufunc):
            return _Proxy(attribute, name)
        if isinstance(attribute, types.ModuleType):
            return _Proxy(attribute, f"{self._label}.{name}")
        if isinstance(attribute, type) or not callable(attribute):
            return attribute  # dtypes, scalar types, constants such as pi
        # launches named "matmul", "add.at", "random.integers", "linalg.norm"
        owner = {"strict": "", "Generator": "random."}.get(self._label, f"{self._label}.")
        return _wrap_function(attribute, name, allow_host=name in _HOST_TO_DEVICE,
                              kind=owner.replace("strict.", "") + name)

    def __call__(self, *args, **kwargs):  # a proxied ufunc called directly
        return _wrap_function(self._target, self._label)(*args, **kwargs)

    def __repr__(self):
        return f"<strict {self._label}>"


namespace = _Proxy(np, "strict")
