"""Loop fission for the sim backend: a kernel that reaches barriers runs a block as loops over its
threads instead of one fiber per thread (the runtime is gpublas/runtime/sim/fission.h; MCUDA and POCL do
this on CPUs). Same .cu source: the compile step appends `gpublas_block_<kernel>` beside each
kernel it can rewrite, and the launch picks it (GPUBLAS_SIM_FISSION=0 keeps fibers).

The rewrite, on the kernel's statements after inlining every __device__ function that reaches a
barrier (template arguments deduced by the compiler from a declaration-only twin):
- the statements between two barriers form a region, emitted as a loop over the block's threads;
  a variable used in another region than its own lives in a per-thread array (the Block's arena);
- __syncthreads() and each warp intrinsic are boundaries between regions (an intrinsic's operand
  is published at the end of one region, the partner lane's value read in the next);
- a declaration whose value is the same for every thread (built from parameters, blockIdx,
  constants; no memory read, no call) and a for/if around barriers whose header is such are
  plain scalar code; any other for/if around barriers narrows the active threads at run time.
What it refuses (while/do/switch around a barrier, break/continue across regions, lambdas or
`auto` values kept across a barrier, parameters given by macro, wmma, __activemask ...) raises
Unsupported: that kernel keeps its fibers, and `report` says why.

Pieces: sim_cparse.py reads the C++ (tokens, statements, declarations), sim_regions.py builds the
region tree of one kernel, this module decides which values are kept per thread and writes the
block function. docs/sim-backend.md has the design and what it measured.
"""
import re

from .. import source
from . import sim_cparse as cp
from .sim_cparse import Unsupported
from .sim_regions import B, K, T, Fission, Region, Var, device_functions


# -- emitting the block function ----------------------------------------------------------------
def _uses(nodes, out):
    for n in nodes:
        if isinstance(n, Region):
            toks = [t for it in n.items for t in (it[1] if it[0] != "decl" else it[2].dims + it[2].init)]
            out.append((n, cp.names(toks)))
        else:
            out.append((n, cp.names(getattr(n, "toks", []) + getattr(n, "head", []))))
            for part in ("cond", "step"):
                if getattr(n, part, None) is not None:
                    _uses([getattr(n, part)], out)
            for part in ("body", "orelse"):
                _uses(getattr(n, part, None) or [], out)
    return out


def emit(fx, params):
    """The tokens of gpublas_block_<kernel>: the hoisted declarations, then the region tree. A
    per-thread variable used by another node than the region declaring it gets an arena array."""
    uses = _uses(fx.nodes, [])
    for v in fx.hoisted:
        if isinstance(v, Var) and v.region is not None:
            v.replicated = any(v.name in names for owner, names in uses if owner is not v.region)
    out = ["static", "void", f"gpublas_block_{fx.name}", "(", *params, ")", "{",
           "gpublas_sim::Block", "&", B, "=", "gpublas_sim::fission_block", "(", ")", ";",
           "uint3", "*", "const", "gpublas_tid", "=", "&", "::", "threadIdx", ";"]
    for h in fx.hoisted:
        out += h.declare() if isinstance(h, Var) else h
    for v in fx.param_vars:
        out += ["for", "(", "unsigned", K, "=", "0", ";", K, "<", B, ".", "n", ";", "++", K, ")",
                v.store, "[", K, "]", "=", v.name, ";"]
    return out + _emit_nodes(fx.nodes, [0], fx.refs) + ["}"]


def _emit_nodes(nodes, counter, refs):
    out = []
    for n in nodes:
        if isinstance(n, Region):
            out += _emit_region(n, counter, refs)
        elif n.kind == "scalar":
            out += n.toks
        elif n.kind == "sync":
            out += ["if", "(", "!", B, ".", "sync", "(", ")", ")", "return", ";"]
        elif n.kind == "warp":
            out += [B, ".", "warp_sync", "(", ")", ";"]
        elif n.kind == "scope":
            out += ["{", *_emit_nodes(n.body, counter, refs), "}"]
        elif n.kind in ("ufor", "uif"):
            out += [*n.head, "{", *_emit_nodes(n.body, counter, refs), "}"]
            if n.kind == "uif" and n.orelse:
                out += ["else", "{", *_emit_nodes(n.orelse, counter, refs), "}"]
        elif n.kind == "mif":
            out += [B, ".", "push", "(", n.saved, ",", n.flag, ")", ";", "{", *_emit_nodes(n.body, counter, refs), "}"]
            if n.orelse:
                out += [B, ".", "flip", "(", n.saved, ",", n.flag, ")", ";", "{", *_emit_nodes(n.orelse, counter, refs), "}"]
            out += [B, ".", "pop", "(", n.saved, ")", ";"]
        else:  # mloop
            out += [B, ".", "loop_enter", "(", n.saved, ")", ";", "for", "(", ";", ";", ")", "{",
                    *_emit_region(n.cond, counter, refs), "if", "(", "!", B, ".", "narrow", "(", n.flag, ")", ")", "break",
                    ";", *_emit_nodes(n.body, counter, refs), *_emit_region(n.step, counter, refs), "}",
                    B, ".", "pop", "(", n.saved, ")", ";"]
    return out


def _emit_region(r, counter, refs):
    """A region as a loop over the block's threads. Each kept value the region uses is copied from
    its arena array into a local at the start (so it can live in registers) and, if the region may
    write it, back at the end, after the label a thread's `return` jumps to."""
    counter[0] += 1
    label = f"gpublas_next{counter[0]}"
    body, returns, declared = [], False, []
    for item in r.items:
        if item[0] == "raw":
            toks, found = _exits(item[1], label)
            body += toks
            returns |= found
        elif item[0] == "publish":
            body += [B, ".", "publish", "(", T, ",", *item[1], ")", ";"]
        else:
            _, spec, d, v = item
            if not v.replicated:
                body += [*spec, *d.ptr, d.name, *d.dims, *d.init, ";"]
                continue
            declared.append(v)
            if d.init and d.dims:
                raise Unsupported(f"an initialized array ({d.name}) kept across a barrier")
            if d.init[:1] == ["="] and d.init[1] != "{" and not d.ptr:
                # `T x = e;` converts e to T as copy-initialization does (`x = e` would pick an
                # assignment operator: ambiguous for __half from an int)
                body += [d.name, "=", v.alias, "(", *d.init[1:], ")", ";"]
            elif d.init[:1] == ["="]:
                body += [d.name, "=", *([v.alias] if d.init[1] == "{" else []), *d.init[1:], ";"]
            elif d.init:
                body += [d.name, "=", v.alias, *d.init, ";"]
    if not body:
        return []
    used, writes = cp.names(body), cp.written(body, refs=refs)
    binds = {v.name: v for v in r.scope if v.replicated and v.name in used}
    if {v.name for v in declared} & set(binds) or len({v.name for v in declared}) < len(declared):
        raise Unsupported("a kept variable shadows another in one region")
    head = [B, ".", "begin", "(", ")", ";", "for", "(", "unsigned", K, "=", "0", ";", K, "<", B, ".", "n", ";",
            "++", K, ")", "{", "const", "unsigned", T, "=", B, ".", "at", "(", K, ")", ";",
            "if", "(", T, "==", "~", "0u", ")", "continue", ";",
            "const", "uint3", "threadIdx", "=", B, ".", "tids", "[", T, "]", ";",
            "*", "gpublas_tid", "=", "threadIdx", ";"]
    back = list(declared)
    # an array named without an index decays to a pointer, which may be written through
    bare = {t for k, t in enumerate(body) if k + 1 < len(body) and body[k + 1] != "["}
    for v in binds.values():
        if v.name in writes or (v.dims and v.name in bare):
            head += [v.alias, v.name, ";", "std::memcpy", "(", "&", v.name, ",", "&", v.store, "[", T, "]", ",",
                     "sizeof", "(", v.alias, ")", ")", ";"]
            back.append(v)
        else:
            head += ["const", v.alias, *(["&"] if v.dims else []), v.name, "=", v.store, "[", T, "]", ";"]
    for v in declared:
        head += [v.alias, v.name, ";"]
    tail = [x for v in back for x in ("std::memcpy", "(", "&", v.store, "[", T, "]", ",", "&", v.name, ",",
                                      "sizeof", "(", v.alias, ")", ")", ";")]
    done = ["if", "(", B, ".", "alive", "==", "0", ")", "return", ";"] if returns else []  # every thread exited
    return head + ["{", *body, "}", *([label, ":", ";"] if returns else []), *tail, "}", *done]


def _exits(toks, label):
    """toks with `return;` as the thread's exit (lambda bodies left alone), and whether any was."""
    out, k, found = [], 0, False
    while k < len(toks):
        t = toks[k]
        if t == "]" and k + 1 < len(toks) and toks[k + 1] in ("(", "{"):  # a lambda: copy its body as is
            j = cp.closing(toks, k + 1) + 1 if toks[k + 1] == "(" else k + 1
            while j < len(toks) and toks[j] != "{":
                j += 1
            end = cp.closing(toks, j) + 1
            out += toks[k:end]
            k = end
            continue
        if t == "return":
            if toks[k + 1] != ";":
                raise Unsupported("a kernel returning a value")
            out += ["{", B, ".", "exit", "(", T, ")", ";", "goto", label, ";", "}"]
            found, k = True, k + 2
            continue
        out.append(t)
        k += 1
    return out, found


def _match(text, i):
    """Index after the bracket closing text[i]."""
    depth, pairs = 0, {"(": ")", "{": "}"}
    close = pairs[text[i]]
    for j in range(i, len(text)):
        if text[j] == text[i]:
            depth += 1
        elif text[j] == close:
            depth -= 1
            if depth == 0:
                return j + 1
    raise Unsupported("unbalanced brackets")


def _expand_params(text, params):
    """A kernel's parameter list with the one-line #defines of `text` expanded (a family may spell its
    list once as a macro: gemm.cu's GEMM_PARAMS), as source.kernel_signatures reads it."""
    defines = "".join(line + "\n" for line in re.findall(r"^[ \t]*#define[^\n]*", text, re.M))
    return source.expand_object_macros(defines + "\0" + params).split("\0", 1)[1] if defines else params


def transform(text, kernels, barrier_names, full_text, source_name):
    """(text with gpublas_block_<k> after each kernel k it could rewrite, {kernel: None if
    rewritten, else why not}) for the kernels in `kernels` that reach a barrier. `text` has no
    comments; `full_text` is it with its cuda_src headers inlined (where device functions live)."""
    report, helpers, done_helpers, pieces, at = {}, {}, set(), [], 0
    try:
        toks = cp.tokenize(full_text)
        functions, refs = device_functions(toks, set(barrier_names) - set(kernels)), cp.reference_params(toks)
    except Unsupported as e:
        return text, {k: f"the source: {e}" for k in kernels if k in barrier_names}
    for k in [k for k in kernels if k in barrier_names]:
        m = re.search(rf"__global__[^;{{}}]*?\b{k}\s*\(", text)
        if m is None:
            report[k] = "definition not found"
            continue
        open_ = m.end() - 1
        close = _match(text, open_)
        brace = close + len(text[close:]) - len(text[close:].lstrip())
        if text[brace:brace + 1] != "{":
            report[k] = "definition not found"
            continue
        end = _match(text, brace)
        try:
            params = cp.tokenize(_expand_params(text, text[open_ + 1:close - 1]))
            code = emit(Fission(k, params, cp.tokenize(text[brace + 1:end - 1]), functions, helpers, refs), params)
        except Unsupported as e:
            report[k] = str(e)
            continue
        report[k] = None
        new = [h for n, h in helpers.items() if n not in done_helpers]
        done_helpers.update(helpers)
        line = text.count("\n", 0, end) + 1
        pieces += [text[at:end], f'\n#line 1 "<fission of {k}>"\n', *(cp.text(h) for h in new), cp.text(code),
                   f'#line {line} "{source_name}"\n']
        at = end
    return "".join(pieces) + text[at:], report
