"""What DeviceArray's methods call: the table `impl` the modules above the array fill with `provide(...)`, and
the factories of the operator, comparison, reduction and method wrappers that hand their work to it
(gpublas.core.array defines every method in its class body with them)."""


class _Operations:
    """The functions DeviceArray's methods hand their work to, by name (`impl.getitem` is
    gpublas.core.indexing.getitem; each section of the class names its module). Those modules import this
    one, so it cannot import them: each hands its functions over with `provide(...)` on its last line,
    run when gpublas imports it (as NumPy's ndarray reaches its ufuncs through umath's number table)."""

    def __getattr__(self, name):  # reached only for a name no module has provided
        raise AttributeError(f"no module has provided DeviceArray's operation '{name}' "
                             "(import gpublas, which imports every module that provides one)")


impl = _Operations()


def provide(**functions):
    """Makes each function the one DeviceArray's methods call as `impl.<name>` (once per name)."""
    for name, f in functions.items():
        if name in vars(impl):
            raise RuntimeError(f"DeviceArray's operation '{name}' is provided twice")
        setattr(impl, name, f)


def arithmetic(name, symbol):
    """The three methods of an arithmetic operator (gpublas.numpy_api.ops.forward, reflected, inplace)."""
    def forward(self, other):
        return impl.forward(name, self, other)

    def reflected(self, other):
        return impl.reflected(name, self, other)

    def inplace(self, other):
        return impl.inplace(name, self, other)

    forward.__doc__ = f"self {symbol} other, elementwise with broadcasting ({name})."
    reflected.__doc__ = f"other {symbol} self, for a scalar or ndarray on the left ({name})."
    inplace.__doc__ = f"self {symbol}= other, written into self, whose shape must not change ({name})."
    return forward, reflected, inplace


def comparison(name):
    """A comparison operator (gpublas.numpy_api.ops.comparison): a bool array, never identity."""
    def compare(self, other):
        return impl.comparison(name, self, other)

    compare.__doc__ = f"Elementwise {name} as a bool array (arrays or scalars, broadcasting)."
    return compare


def reduction(name):
    """A reduction method over every element (a 0-d array) or along `axis` (gpublas.core.reduction, ops)."""
    def reduce(self, axis=None, keepdims=False, **dtype):  # sum and mean also take dtype= (a 16-bit sum in FP32)
        return getattr(impl, name)(self, axis, keepdims, **dtype)

    reduce.__doc__ = f"gpublas.{name} of this array: over every element (a 0-d array) or along `axis`."
    return reduce


def method(name, signature):
    """A method handing self and its arguments to impl.<name> (gpublas.numpy_api.ops or elementwise)."""
    def method(self, *args, **kwargs):
        return getattr(impl, name)(self, *args, **kwargs)

    method.__name__, method.__doc__ = name, f"a.{name}{signature}"
    return method
