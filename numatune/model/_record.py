"""`@record`: an annotated class turned into an immutable, tuple-backed record (a namedtuple, built cheaper).

Why not dataclasses or typing.NamedTuple: creating a frozen dataclass costs about 1.7 ms on Python 3.11
(it execs six generated methods) and typing.NamedTuple needs the `typing` module (about 15 ms to
import here); the machine-readable reports start up without either. Why not collections.namedtuple
itself: it compiles a `__new__` from source for every class (eval) and `@record` then derived a second
class from it: about 450,000 instructions per record, dozens of records on every start-up path. Here one class is
made per record, its `__new__` is a precompiled function of the right arity renamed to the field names
(`CodeType.replace`), its accessors are namedtuple's own C descriptors, and the shared methods are
defined once below: the same fast keyword construction, no compiling at import.

A record keeps the class's annotations, defaults, docstring, properties, methods and `__post_init__`
check, and offers what the code uses: keyword construction, attribute access, `_replace`, `_make`,
`_fields`, `_field_defaults`, `_asdict`, equality, hashing, repr and pickling (as a namedtuple does).
"""

from __future__ import annotations

try:
    from _collections import _tuplegetter  # namedtuple's own field accessor (C)
except ImportError:  # an interpreter without it: what namedtuple itself falls back to

    def _tuplegetter(index: int, doc: str) -> property:
        return property(lambda self: self[index], doc=doc)

_SKIP = {"__dict__", "__weakref__", "__annotations__", "__module__", "__qualname__"}
_tuple_new = tuple.__new__


# `__new__` of each arity; a record's copy gets its parameters renamed to the fields (keyword calls).
def _new0(_cls): return _tuple_new(_cls, ())  # noqa: E704
def _new1(_cls, a): return _tuple_new(_cls, (a,))  # noqa: E704
def _new2(_cls, a, b): return _tuple_new(_cls, (a, b))  # noqa: E704
def _new3(_cls, a, b, c): return _tuple_new(_cls, (a, b, c))  # noqa: E704
def _new4(_cls, a, b, c, d): return _tuple_new(_cls, (a, b, c, d))  # noqa: E704
def _new5(_cls, a, b, c, d, e): return _tuple_new(_cls, (a, b, c, d, e))  # noqa: E704
def _new6(_cls, a, b, c, d, e, f): return _tuple_new(_cls, (a, b, c, d, e, f))  # noqa: E704
def _new7(_cls, a, b, c, d, e, f, g): return _tuple_new(_cls, (a, b, c, d, e, f, g))  # noqa: E704
def _new8(_cls, a, b, c, d, e, f, g, h): return _tuple_new(_cls, (a, b, c, d, e, f, g, h))  # noqa: E704
def _new9(_cls, a, b, c, d, e, f, g, h, i): return _tuple_new(_cls, (a, b, c, d, e, f, g, h, i))  # noqa: E704
def _new10(_cls, a, b, c, d, e, f, g, h, i, j): return _tuple_new(_cls, (a, b, c, d, e, f, g, h, i, j))  # noqa: E704
def _new11(_cls, a, b, c, d, e, f, g, h, i, j, k):  # noqa: E704
    return _tuple_new(_cls, (a, b, c, d, e, f, g, h, i, j, k))
def _new12(_cls, a, b, c, d, e, f, g, h, i, j, k, l):  # noqa: E704, E741
    return _tuple_new(_cls, (a, b, c, d, e, f, g, h, i, j, k, l))
def _new13(_cls, a, b, c, d, e, f, g, h, i, j, k, l, m):  # noqa: E704, E741
    return _tuple_new(_cls, (a, b, c, d, e, f, g, h, i, j, k, l, m))
def _new14(_cls, a, b, c, d, e, f, g, h, i, j, k, l, m, n):  # noqa: E704, E741
    return _tuple_new(_cls, (a, b, c, d, e, f, g, h, i, j, k, l, m, n))
def _new15(_cls, a, b, c, d, e, f, g, h, i, j, k, l, m, n, o):  # noqa: E704, E741
    return _tuple_new(_cls, (a, b, c, d, e, f, g, h, i, j, k, l, m, n, o))
def _new16(_cls, a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p):  # noqa: E704, E741
    return _tuple_new(_cls, (a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p))


_NEW = [_new0, _new1, _new2, _new3, _new4, _new5, _new6, _new7, _new8, _new9, _new10, _new11, _new12,
        _new13, _new14, _new15, _new16]


def _new_template(arity: int):
    """The precompiled `__new__` of ARITY parameters; a wider one is compiled once (rare: few records
    have more than 16 fields)."""
    while len(_NEW) <= arity:
        n = len(_NEW)
        params = ", ".join(f"a{i}" for i in range(n))
        scope: dict = {}
        exec(f"def _new(_cls, {params}): return _tuple_new(_cls, ({params},))", {"_tuple_new": _tuple_new}, scope)
        _NEW.append(scope["_new"])
    return _NEW[arity]


@classmethod
def _make(cls, iterable):
    """A record from a sequence of field values (no `__post_init__` check, as namedtuple's)."""
    result = _tuple_new(cls, iterable)
    if len(result) != len(cls._fields):
        raise TypeError(f"Expected {len(cls._fields)} arguments, got {len(result)}")
    return result


def _replace(self, /, **changes):
    """A copy with some fields changed."""
    result = self._make(map(changes.pop, self._fields, self))
    if changes:
        raise ValueError(f"Got unexpected field names: {list(changes)!r}")
    return result


def _asdict(self):
    return dict(zip(self._fields, self, strict=True))


def __repr__(self):
    return f"{self.__class__.__name__}({', '.join(f'{n}={v!r}' for n, v in zip(self._fields, self, strict=True))})"


def __getnewargs__(self):
    """Pickle as the plain tuple of field values."""
    return tuple(self)


_SHARED = {"_make": _make, "_replace": _replace, "_asdict": _asdict, "__repr__": __repr__,
           "__getnewargs__": __getnewargs__}


def record(cls: type) -> type:
    annotations = dict(cls.__dict__.get("__annotations__", {}))
    names = tuple(annotations)
    for name in names:
        if name.startswith("_") or not name.isidentifier():
            raise ValueError(f"record field names must be identifiers not starting with '_': {name!r}")
    defaults = tuple(cls.__dict__[name] for name in names if name in cls.__dict__)
    if any(name not in cls.__dict__ for name in names[len(names) - len(defaults):]):
        raise TypeError(f"{cls.__name__}: a field without a default follows one with a default")
    template = _new_template(len(names))
    code = template.__code__
    renamed = {"co_varnames": ("_cls", *names), "co_name": "__new__"}
    if hasattr(code, "co_qualname"):  # Python 3.11+
        renamed["co_qualname"] = f"{cls.__qualname__}.__new__"
    code = code.replace(**renamed)
    new = type(template)(code, template.__globals__, "__new__", defaults or None)
    namespace = dict(_SHARED)
    namespace.update({k: v for k, v in cls.__dict__.items() if k not in _SKIP and k not in names})
    for index, name in enumerate(names):
        namespace[name] = _tuplegetter(index, f"Alias for field number {index}")
    namespace.update(__slots__=(), __annotations__=annotations, __module__=cls.__module__,
                     __qualname__=cls.__qualname__, _fields=names, __match_args__=names,
                     _field_defaults=dict(zip(names[len(names) - len(defaults):], defaults, strict=True)))
    check = namespace.pop("__post_init__", None)
    if check is None:
        namespace["__new__"] = new
    else:  # validation on construction, as a dataclass's __post_init__ (not on _replace)

        def __new__(klass, *args, **kwargs):
            self = new(klass, *args, **kwargs)
            check(self)
            return self

        namespace["__new__"] = __new__
    return type(cls.__name__, (tuple,), namespace)
