"""Fakes for the heavy imports (torch, triton, CUDA libraries, paddle ...) of a framework.

Only modules whose top-level name is listed are faked; everything else — above all the
framework's own argument definitions — is imported from the framework's real source. A fake
module answers every attribute: CamelCase names are classes (usable as bases, in isinstance
and in type annotations), other names are callables that also work as decorators.
"""
from __future__ import annotations

import abc
import importlib.abc
import importlib.machinery
import sys
import types
import typing


# Protocol names Python and libraries probe for with getattr/hasattr: a fake must not claim them.
_PROTOCOL = set(dir(object)) | set(dir(type)) | set(dir(types.FunctionType)) | {
    "__wrapped__", "__signature__", "__func__", "__self__", "__set_name__", "__get__", "__set__",
    "__delete__", "__instancecheck__", "__subclasscheck__", "__class_getitem__", "__mro_entries__",
    "__origin__", "__args__", "__parameters__", "__dataclass_fields__", "__dataclass_params__",
    "__len__", "__iter__", "__next__", "__enter__", "__exit__", "__aenter__", "__aexit__",
    "__fspath__", "__copy__", "__deepcopy__", "__getstate__", "__setstate__", "__index__",
    "__int__", "__float__", "__bool__", "__call__", "__getitem__", "__contains__", "__await__",
    "__path__", "__file__", "__loader__", "__spec__", "__all__", "__version__", "__slots__",
    "__abstractmethods__", "__isabstractmethod__", "__orig_bases__", "__supertype__", "__total__",
    "__required_keys__", "__optional_keys__", "__attrs_attrs__", "__match_args__", "__objclass__",
    "__torch_function__", "__array__", "__array_interface__", "__array_priority__",
    "__modify_schema__", "__get_validators__", "__set_name__", "__init_subclass__",
}


def _is_protocol(name: str) -> bool:
    return name in _PROTOCOL or name.startswith(("__pydantic", "__get_pydantic", "__msgspec"))


class _FakeBase:
    """The real base class behind a fake class: `class Model(torch.nn.Linear)` derives from it.
    Its metaclass is `type`, so it never conflicts with a real metaclass among the other bases."""

    def __init__(self, *args, **kwargs):
        pass

    @classmethod
    def __get_pydantic_core_schema__(cls, source, handler):  # a fake type in a pydantic model
        from pydantic_core import core_schema

        return core_schema.any_schema()

    def __getattr__(self, name):
        if _is_protocol(name):
            raise AttributeError(name)
        return _make(f"{type(self).__qualname__}().{name}", name)


class _Fake:
    """Any value of a faked module: callable, decorator, subscriptable, falsy, iterable."""

    def __init__(self, name: str):
        self.__name__ = name.rsplit(".", 1)[-1]
        self.__qualname__ = name

    def __getattr__(self, name):
        if _is_protocol(name):
            raise AttributeError(name)
        return _make(f"{self.__qualname__}.{name}", name)

    def __call__(self, *args, **kwargs):
        # Used as a bare decorator (@torch.compile, @triton.jit): hand the function back.
        if len(args) == 1 and not kwargs and isinstance(
                args[0], (types.FunctionType, types.MethodType, staticmethod, classmethod)):
            return args[0]
        return _Fake(f"{self.__qualname__}()")

    def __getitem__(self, item):
        return _Fake(f"{self.__qualname__}[]")

    def __iter__(self):
        return iter(())

    def __len__(self):
        return 0

    def __bool__(self):
        return False

    def __or__(self, other):
        return self

    def __ror__(self, other):
        return self

    def __mro_entries__(self, bases):
        return (_FakeBase,)

    def __instancecheck__(self, obj):
        return False

    def __subclasscheck__(self, cls):
        return False

    def __int__(self):
        return 0

    def __index__(self):
        return 0

    def __float__(self):
        return 0.0

    def __eq__(self, other):
        return self is other

    def __hash__(self):
        return id(self)

    def __lt__(self, other):
        return False

    __le__ = __gt__ = __ge__ = __lt__

    def __repr__(self):
        return f"<fake {self.__qualname__}>"

    def __contains__(self, item):
        return False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class _FakeClass(_Fake):
    """A class of a faked module (torch.Tensor, paddle.nn.Linear ...): an object, not a type,
    so that deriving from it (via __mro_entries__) never brings in a metaclass; isinstance and
    issubclass work through a plain base class made on first use."""

    def __init__(self, name: str):
        super().__init__(name)
        self._base = None

    @property
    def base(self):
        if self._base is None:
            self._base = type(self.__name__, (_FakeBase,),
                              {"__module__": "fake", "__qualname__": self.__qualname__})
        return self._base

    def __mro_entries__(self, bases):
        return (self.base,)

    def __call__(self, *args, **kwargs):
        return self.base(*args, **kwargs)

    def __instancecheck__(self, obj):
        return isinstance(obj, self.base)

    def __subclasscheck__(self, cls):
        return isinstance(cls, type) and issubclass(cls, self.base)

    def __bool__(self):
        return True

    def __getitem__(self, item):  # Tensor[...] in annotations
        return self

    def register(self, *args, **kwargs):  # AutoProcessor.register(Config, Processor) ...
        return args[0] if args else None

    def __get_pydantic_core_schema__(self, source, handler):
        from pydantic_core import core_schema

        return core_schema.any_schema()


def _arith(self, *other):
    return self


def _false(self, *args):
    return False


# Instances of a fake class (torch.Tensor ...) answer the same protocols; torch.Tensor.__bool__
# and the like exist on the class.
for _op in ("bool", "contains"):
    setattr(_FakeBase, f"__{_op}__", _false)
_FakeBase.__len__ = lambda self: 0
_FakeBase.__iter__ = lambda self: iter(())
_FakeBase.__getitem__ = lambda self, item: _Fake("item")
_FakeBase.__setitem__ = lambda self, item, value: None
_FakeBase.__index__ = _FakeBase.__int__ = lambda self: 0
_FakeBase.__float__ = lambda self: 0.0

for _op in ("neg", "pos", "abs", "invert", "add", "radd", "sub", "rsub", "mul", "rmul", "truediv",
            "rtruediv", "floordiv", "rfloordiv", "mod", "rmod", "pow", "rpow", "and", "rand",
            "lshift", "rshift", "matmul"):
    setattr(_Fake, f"__{_op}__", _arith)
    setattr(_FakeBase, f"__{_op}__", _arith)


# Lower-case names that are classes in the real module (used in annotations and isinstance).
_LOWER_TYPES = {"device", "dtype", "layout", "memory_format"}


# Dotted names with a set value (torch.cuda.get_device_capability of the emulated GPU ...).
VALUES: dict[str, object] = {}


def _make(qualname: str, name: str):
    if qualname in VALUES:
        return VALUES[qualname]
    if (name[:1].isupper() and not name.isupper()) or name in _LOWER_TYPES:
        return _FakeClass(qualname)
    return _Fake(qualname)


# Dotted names a fake module must not have (hasattr(torch, "npu") means an Ascend build).
ABSENT: set[str] = set()


class FakeModule(types.ModuleType):
    def __init__(self, name: str, version: str = "0.0.0"):
        super().__init__(name)
        self.__path__ = []  # a package: submodules are faked too
        self.__version__ = version
        self.__file__ = f"<fake {name}>"

    def __getattr__(self, name):
        if _is_protocol(name) or f"{self.__name__}.{name}" in ABSENT:
            raise AttributeError(name)
        value = _make(f"{self.__name__}.{name}", name)
        setattr(self, name, value)
        return value


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, tops: dict[str, str]):
        self.tops = tops
        self.faked: set[str] = set()

    def _root(self, fullname):
        parts = fullname.split(".")
        for i in range(1, len(parts) + 1):
            if ".".join(parts[:i]) in self.tops:
                return ".".join(parts[:i])
        return None

    def find_spec(self, fullname, path=None, target=None):
        if self._root(fullname):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        root = self._root(spec.name)
        self.faked.add(root)
        return FakeModule(spec.name, self.tops[root])

    def exec_module(self, module):
        pass


def install(always: dict[str, str], fallback: dict[str, str] | None = None,
            absent: set[str] = frozenset(), values: dict[str, object] | None = None
            ) -> tuple[_Finder, _Finder]:
    """Fake every module under the top-level names of `always` ({name: __version__}) even
    where it is installed (torch, triton, CUDA libraries); those of `fallback` only where it is
    not installed (light service dependencies: fastapi, zmq ...). The dotted names in `absent`
    are left out of the fakes (hasattr(torch, "npu") must be false); `values` sets dotted
    names to real values."""
    ABSENT.update(absent)
    VALUES.update(values or {})
    for name in list(sys.modules):
        if any(name == k or name.startswith(k + ".") for k in always):
            del sys.modules[name]
    front = _Finder(dict(always))
    back = _Finder(dict(fallback or {}))
    sys.meta_path.insert(0, front)
    sys.meta_path.append(back)
    return front, back


def faked(finders) -> list[str]:
    return sorted(set().union(*(f.faked for f in finders)))


def _infer_schema(fn) -> str:
    """torch.library.infer_schema, as far as import-time op registration reads it: the number
    of Tensor outputs."""
    import inspect
    import typing

    ret = inspect.signature(fn).return_annotation
    if isinstance(ret, str):
        n = ret.count("Tensor")
    elif typing.get_origin(ret) is tuple:
        n = len(typing.get_args(ret))
    elif ret in (None, type(None), inspect.Signature.empty):
        n = 0
    else:
        n = 1
    outs = "()" if n == 0 else "Tensor" if n == 1 else "(" + ", ".join(["Tensor"] * n) + ")"
    params = ", ".join(f"Tensor {p}" for p in inspect.signature(fn).parameters)
    return f"({params}) -> {outs}"


def _h200_properties(*args, **kwargs):
    return types.SimpleNamespace(name="NVIDIA H200", major=9, minor=0, total_memory=150_754_820_096,
                                 multi_processor_count=132, gcnArchName="", uuid="fake")


# torch as on one node of 8 H200 GPUs (the devices moeplan's plans target); the framework's
# own code reads these when it picks defaults.
CUDA_H200: dict[str, object] = {
    "torch.cuda.is_available": lambda: True,
    "torch.cuda.device_count": lambda: 8,
    "torch.cuda._is_compiled": lambda: True,
    "torch.cuda._device_count_nvml": lambda: 8,
    "torch._C._cuda_getDeviceCount": lambda: 8,
    "torch.accelerator.device_count": lambda: 8,
    "torch.accelerator.is_available": lambda: True,
    "torch.cuda.current_device": lambda: 0,
    "torch.cuda.get_device_capability": lambda *a, **k: (9, 0),
    "torch.cuda.get_device_name": lambda *a, **k: "NVIDIA H200",
    "torch.cuda.get_device_properties": _h200_properties,
    "torch.cuda.mem_get_info": lambda *a, **k: (148_000_000_000, 150_754_820_096),
    "torch.cuda.is_bf16_supported": lambda *a, **k: True,
    "torch.version.cuda": "13.0",
    "torch.version.hip": None,
    "torch.version.musa": None,
    "torch.version.xpu": None,
    "torch.backends.mps.is_available": lambda: False,
    "torch.xpu.is_available": lambda: False,
    "torch.mps.is_available": lambda: False,
    "torch.distributed.is_initialized": lambda: False,
    "torch.distributed.is_available": lambda: True,
    # custom-op registration at import time parses the schema string
    "torch.library.infer_schema": lambda fn, *a, **k: _infer_schema(fn),
}


class dtype:
    """torch.dtype of the fake torch: name, itemsize, is_floating_point; equal by name."""

    def __init__(self, name: str, itemsize: int, floating: bool, signed: bool = True):
        self.name, self.itemsize, self.is_floating_point = name, itemsize, floating
        self.is_signed, self.is_complex = signed, False

    def to_real(self):
        return self

    def __repr__(self):
        return f"torch.{self.name}"

    def __reduce__(self):
        return (dtype, (self.name, self.itemsize, self.is_floating_point, self.is_signed))


_DTYPES = {
    "float16": (2, True), "bfloat16": (2, True), "float32": (4, True), "float64": (8, True),
    "uint8": (1, False), "uint16": (2, False), "uint32": (4, False), "uint64": (8, False),
    "int8": (1, False), "int16": (2, False), "int32": (4, False), "int64": (8, False),
    "bool": (1, False), "float8_e4m3fn": (1, True), "float8_e5m2": (1, True),
    "float8_e4m3fnuz": (1, True), "float8_e5m2fnuz": (1, True), "float8_e8m0fnu": (1, True),
    "float4_e2m1fn_x2": (1, True), "complex64": (8, True),
}
_ALIASES = {"half": "float16", "float": "float32", "double": "float64", "long": "int64",
            "int": "int32", "short": "int16"}

TORCH_DTYPES: dict[str, object] = {"torch.dtype": dtype}
for _name, (_size, _fp) in _DTYPES.items():
    TORCH_DTYPES[f"torch.{_name}"] = dtype(_name, _size, _fp, not _name.startswith("uint"))
for _alias, _name in _ALIASES.items():
    TORCH_DTYPES[f"torch.{_alias}"] = TORCH_DTYPES[f"torch.{_name}"]
CUDA_H200.update(TORCH_DTYPES)

_FINFO = {  # max, eps, tiny
    "float16": (65504.0, 0.0009765625, 6.103515625e-05),
    "bfloat16": (3.3895313892515355e38, 0.0078125, 1.1754943508222875e-38),
    "float32": (3.4028234663852886e38, 1.1920928955078125e-07, 1.1754943508222875e-38),
    "float64": (1.7976931348623157e308, 2.220446049250313e-16, 2.2250738585072014e-308),
    "float8_e4m3fn": (448.0, 0.125, 0.015625),
    "float8_e5m2": (57344.0, 0.25, 6.103515625e-05),
    "float8_e4m3fnuz": (240.0, 0.125, 0.0078125),
    "float8_e5m2fnuz": (57344.0, 0.125, 3.0517578125e-05),
}


def _finfo(dt):
    mx, eps, tiny = _FINFO[dt.name]
    return types.SimpleNamespace(max=mx, min=-mx, eps=eps, tiny=tiny, smallest_normal=tiny,
                                 bits=8 * dt.itemsize, dtype=dt.name)


def _iinfo(dt):
    bits = 8 * dt.itemsize
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if dt.is_signed else (0, (1 << bits) - 1)
    return types.SimpleNamespace(min=lo, max=hi, bits=bits, dtype=dt.name)


TORCH_DTYPES["torch.finfo"] = _finfo
TORCH_DTYPES["torch.iinfo"] = _iinfo
CUDA_H200.update(TORCH_DTYPES)

_NVML = {
    "nvmlDeviceGetCount": lambda: 8,
    "nvmlDeviceGetName": lambda *a: "NVIDIA H200",
    "nvmlDeviceGetCudaComputeCapability": lambda *a: (9, 0),
    "nvmlDeviceGetMemoryInfo": lambda *a: types.SimpleNamespace(
        total=150_754_820_096, free=148_000_000_000, used=2_754_820_096),
    "nvmlDeviceGetUUID": lambda *a: "GPU-fake",
    "nvmlSystemGetDriverVersion": lambda: "600.00",
}
for _mod in ("pynvml", "vllm.third_party.pynvml"):  # vLLM vendors its own copy
    for _k, _v in _NVML.items():
        CUDA_H200[f"{_mod}.{_k}"] = _v


class Module:
    """torch.nn.Module: a plain class, so that a model class derived from it has only the class
    attributes its own source gives it (frameworks inspect them: supports_pp, score_type ...)."""

    def __init__(self, *args, **kwargs):
        pass

    def __getattr__(self, name):
        if _is_protocol(name):
            raise AttributeError(name)
        return _Fake(f"torch.nn.Module().{name}")

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def forward(self, *args, **kwargs):
        return _Fake("forward")


for _m in ("cuda", "cpu", "to", "half", "float", "bfloat16", "train", "eval", "parameters",
           "named_parameters", "buffers", "named_buffers", "modules", "named_modules", "children",
           "named_children", "register_buffer", "register_parameter", "register_module",
           "add_module", "state_dict", "load_state_dict", "apply", "zero_grad", "requires_grad_",
           "extra_repr", "get_submodule", "get_parameter", "get_buffer", "type", "double", "xpu",
           "share_memory", "register_forward_hook", "register_forward_pre_hook", "compile"):
    setattr(Module, _m, lambda self, *a, **k: _Fake("Module method"))

CUDA_H200["torch.nn.Module"] = Module
CUDA_H200["torch.nn.modules.module.Module"] = Module


class Library:
    """torch.library.Library: custom-op registration at import time reads `.ns` / `.m.name`."""

    def __init__(self, ns, kind="DEF", *args, **kwargs):
        self.ns = ns
        self.m = types.SimpleNamespace(name=ns)

    def __getattr__(self, name):
        if _is_protocol(name):
            raise AttributeError(name)
        return _Fake(f"torch.library.Library().{name}")


CUDA_H200["torch.library.Library"] = Library
