"""Flat parameter groups: an optimizer's parameters of one dtype moved into one contiguous buffer for
the weights and one for the gradients, each Parameter's `.data` and `.grad` becoming a view of its
slice (values copied), so that an update, a zero_grad or an optimizer state buffer is one array per
group and one launch instead of one per parameter (PyTorch's multi-tensor apply, by layout). The
kernels are elementwise, so the results are the same bits.

A parameter whose arrays were replaced since (Module.to, or another optimizer that took it over)
no longer aliases its slice: `intact()` is then False and the optimizer goes back to one launch per
parameter, on the same state (per-parameter views of the flat state buffers)."""
import gpublas


class FlatGroups:
    """`groups`: [(data, grad, [parameter index])] per dtype (and per `keys` value: an optimizer's parameter
    group), in order of first appearance; `views`: each parameter's (data view, grad view). A list with a
    parameter twice is left as it is."""

    def __init__(self, params, keys=None):
        self.params, self.groups, self.views = params, [], []
        if len({id(p) for p in params}) != len(params):
            return
        by_dtype = {}
        for i, p in enumerate(params):
            by_dtype.setdefault((p.dtype, None if keys is None else keys[i]), []).append(i)
        self.views = [None] * len(params)
        for (dtype, _), members in by_dtype.items():
            n = sum(params[i].data.size for i in members)
            data, grad = gpublas.empty((n,), dtype), gpublas.empty((n,), dtype)
            for i, (d, g) in zip(members, self._slices(data, grad, members)):
                p = params[i]
                d.copy_from(p.data)
                g.copy_from(p.grad)
                p.data, p.grad = self.views[i] = d, g
            self.groups.append((data, grad, members))

    def _slices(self, data, grad, members):
        offset = 0
        for i in members:
            shape, size = self.params[i].shape, self.params[i].data.size
            yield (data[offset:offset + size].reshape(shape), grad[offset:offset + size].reshape(shape))
            offset += size

    def intact(self):
        """True while every parameter's .data and .grad are still the views made here."""
        if not self.groups:
            return False
        for p, (d, g) in zip(self.params, self.views):
            if p.data is not d or p.grad is not g:
                return False
        return True

    def state(self, make):
        """An optimizer state buffer in the groups' layout: ([flat buffer per group], [view per parameter]);
        make(shape, dtype) allocates (gpublas.zeros or gpublas.empty)."""
        if not self.groups:
            per = [make(p.shape, p.dtype) for p in self.params]
            return per, per
        flat, per = [], [None] * len(self.params)
        for data, _, members in self.groups:
            buf = make(data.shape, data.dtype)
            flat.append(buf)
            for i, (view, _) in zip(members, self._slices(buf, buf, members)):
                per[i] = view
        return flat, per

    def zero_grad(self):
        """Every gradient set to 0: one memset per group while intact, else one per parameter."""
        if self.intact():
            for _, grad, _ in self.groups:
                grad.fill(0)
        else:
            for p in self.params:
                p.zero_grad()


def span(arrays):
    """One 1-D view over `arrays` when they are, in order, C-contiguous slices of one allocation lying
    back to back with one dtype (a flat group's gradients, as _slices lays them out), else None."""
    if not arrays:
        return None
    first = arrays[0]
    end = first._offset
    for a in arrays:
        if a._mem is not first._mem or a.dtype != first.dtype or not a.c_contiguous or a._offset != end:
            return None
        end += a.nbytes
    base = first if first.base is None else first.base
    n = (end - first._offset) // first.itemsize
    return base._view((n,), (first.itemsize,), first._offset - base._offset)
