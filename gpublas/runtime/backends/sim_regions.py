"""The region tree of a barrier kernel for the sim's loop fission (sim_fission.py emits it): the
kernel's statements, with the __device__ functions that reach barriers inlined, cut at barriers
into regions (code all threads run before any goes on), scalar code where a value is the same in
every thread, and the branches and loops around barriers. Unsupported when a shape is not handled.
"""
from . import sim_cparse as cp
from .sim_cparse import Stmt, Unsupported

SHUFFLES = {"__shfl_sync": "fx_shfl", "__shfl_down_sync": "fx_shfl_down", "__shfl_up_sync": "fx_shfl_up",
            "__shfl_xor_sync": "fx_shfl_xor"}
VOTES = {"__ballot_sync": "fx_ballot", "__any_sync": "fx_any", "__all_sync": "fx_all",
         "__match_any_sync": "fx_match_any"}
BARRIERS = {"__syncthreads", "__syncwarp", *SHUFFLES, *VOTES}
REFUSED = {"__syncthreads_count", "__syncthreads_and", "__syncthreads_or", "__activemask", "wmma"}
UNIFORM_BUILTINS = {"blockIdx", "blockDim", "gridDim", "warpSize"}
DROPPED = {"__device__", "__forceinline__", "inline", "static", "__host__", "__noinline__", "extern"}
B, T, K = "gpublas_b", "gpublas_t", "gpublas_k"


class Function:
    """A __device__ function's definition: template parameters, return type, parameters, body."""

    def __init__(self, toks, start, name_at):
        header, k, self.name = toks[start:name_at], 0, toks[name_at]
        self.tparams, self.nontype = [], False
        if header[:1] == ["template"]:
            close = _angle_close(header, 1)
            for p in cp.split_top(header[2:close]):
                if p[:1] in (["class"], ["typename"]) and len(p) == 2:
                    self.tparams.append(p[1])
                else:
                    self.nontype = True
            k = close + 1
        self.ret = [t for t in header[k:] if t not in DROPPED]
        open_ = name_at + 1
        close = cp.closing(toks, open_)
        self.params = []  # (type tokens, name, default tokens)
        for p in cp.split_top(toks[open_ + 1:close]):
            default = []
            if "=" in p:
                p, default = p[:p.index("=")], p[p.index("=") + 1:]
            if p and p != ["void"]:
                self.params.append((p[:-1], p[-1], default) if cp.is_ident(p[-1]) else (None, None, None))
        self.signature = toks[open_ + 1:close]
        body_open = close + 1
        self.body = toks[body_open + 1:cp.closing(toks, body_open)]


def _angle_close(toks, i):
    depth = 0
    for j in range(i, len(toks)):
        depth += {"<": 1, ">": -1, ">>": -2}.get(toks[j], 0)
        if depth <= 0:
            return j
    raise Unsupported("unbalanced template brackets")


def device_functions(toks, names):
    """{name: Function, or None when it is defined more than once (overloads)} for `names`. The CUDA
    intrinsics (BARRIERS) are never among them, even where a header overloads one for its own type
    (common.cuh's complex shuffles): the pass rewrites their calls itself (fission.h's fx_shfl_*)."""
    names = set(names) - BARRIERS
    found = {}
    for k in range(len(toks) - 1):
        if toks[k] in names and toks[k + 1] == "(" and (k == 0 or toks[k - 1] not in (".", "->", "::")):
            close = cp.closing(toks, k + 1)
            if close + 1 < len(toks) and toks[close + 1] == "{":
                start = k
                while start > 0 and toks[start - 1] not in (";", "{", "}") and not toks[start - 1].startswith("#"):
                    start -= 1
                found[toks[k]] = None if toks[k] in found else Function(toks, start, k)
    return found


class Var:
    """A variable of the kernel: per thread (kept in an arena array when used in another region)
    or uniform (plain scalar code)."""

    def __init__(self, fx, name, spec, ptr, dims, uniform):
        fx.ids += 1
        self.name, self.alias, self.store = name, f"gpublas_t{fx.ids}", f"gpublas_r{fx.ids}"
        self.spec = [t for t in spec if t not in ("static", "constexpr", "__shared__", "register")]
        self.ptr, self.dims, self.uniform = ptr, dims, uniform
        self.replicated = self.alias_needed = False
        self.region = None

    def declare(self):
        out = []
        if self.alias_needed or self.replicated:
            if "auto" in self.spec or "&" in self.ptr or "&&" in self.ptr:
                raise Unsupported(f"'{self.name}' (auto or a reference) is kept across a barrier")
            ptr = [t for t in self.ptr if t not in ("__restrict__", "__restrict")]
            spec = [t for t in self.spec if t not in ("__restrict__", "__restrict")]
            out += ["using", self.alias, "=", "std::remove_const_t", "<", *spec, *ptr, ">", *self.dims, ";"]
        if self.replicated:
            out += [self.alias, "*", self.store, "=", B, ".", "alloc", "<", self.alias, ">", "(", ")", ";"]
        return out


class Region:
    def __init__(self, scope):
        self.scope, self.items, self.returns = list(scope), [], False


class Node:
    """kind: 'scalar' (toks), 'sync', 'warp', 'scope' (body), 'ufor' (head, body), 'uif' (head, body,
    orelse), 'mif' (flag, saved, body, orelse), 'mloop' (flag, saved, cond, body, step)."""

    def __init__(self, kind, **kw):
        self.kind = kind
        self.__dict__.update(kw)


class Fission:
    def __init__(self, name, params, body, functions, helpers, refs=None):
        self.name, self.functions, self.helpers = name, functions, helpers
        self.refs = refs or {}  # cp.reference_params of the source: calls that may write their arguments
        self.ids = self.inlined = 0
        self.hoisted = []  # token lists and Vars, in order: emitted at the top of the block function
        self.barrier_names = BARRIERS | {n for n, f in functions.items()}
        self.writes = cp.written(body, refs=self.refs)
        param_writes = cp.written(body, through_index=False, refs=self.refs)
        self.params = {}
        for p in cp.split_top(params):
            if len(p) < 2 or not cp.is_ident(p[-1]):
                raise Unsupported("a parameter list this parser cannot read (a macro?)")
            self.params[p[-1]] = p[:-1]
        self.per_thread = {"threadIdx"}
        self.constants = set()
        scope = []
        for name, ptype in self.params.items():
            if name in param_writes:
                v = Var(self, name, ptype, [], [], False)
                v.replicated = True
                self.hoisted.append(v)
                scope.append(v)
                self.per_thread.add(name)
        self.param_vars = list(scope)
        self.nodes = self.block_list(cp.parse_block(body), scope)

    # -- analysis ------------------------------------------------------------------------------
    def has_barrier(self, toks):
        found = set(toks) & (self.barrier_names | REFUSED)
        if found & REFUSED:
            raise Unsupported(f"{sorted(found & REFUSED)[0]} in a barrier kernel")
        return bool(found)

    def uniform(self, toks, also=(), step=False):
        """Whether toks has the same value in every thread: no call, memory read or side effect,
        only uniform names (a loop's step may update its variable, `also`)."""
        if step and not cp.written(toks, refs=self.refs) <= set(also):
            return False
        for k, t in enumerate(toks):
            prev = toks[k - 1] if k else ""
            if t in ("[", "->") or ((t in ("++", "--") or t in cp.ASSIGN) and not step):
                return False
            if t == "(" and (cp.is_ident(prev) and prev not in ("sizeof", "return") or prev == ">"):
                return False
            if t == "*" and not (cp.is_ident(prev) or prev in (")", "]") or prev[:1].isdigit()):
                return False
            if cp.is_ident(t) and prev not in (".", "->", "::") and t in self.per_thread and t not in also:
                return False
        return True

    # -- building the region tree --------------------------------------------------------------
    def block_list(self, stmts, scope):
        nodes, work = [], list(stmts)
        while work:
            s = work.pop(0)
            if not self.has_barrier(s.src):
                self.add_plain(nodes, s, scope)
            elif s.kind == "block":
                nodes.append(Node("scope", body=self.block_list(s.body, list(scope))))
            elif s.kind == "simple":
                expanded = self.expand(s, scope)
                if expanded is not None:
                    work[:0] = expanded
                else:
                    work[:0] = self.intrinsic(nodes, s, scope)
            elif s.kind == "for":
                nodes.append(self.loop(s, scope))
            elif s.kind == "if":
                nodes += self.branch(nodes, s, scope)
            else:
                raise Unsupported(f"a barrier inside {s.src[0]}")
        return nodes

    def region(self, nodes, scope):
        if not nodes or not isinstance(nodes[-1], Region):
            nodes.append(Region(scope))
        return nodes[-1]

    def add_plain(self, nodes, s, scope):
        _check_jumps(s)
        toks = s.src
        if s.kind == "simple" and toks[0] in ("using", "typedef", "static_assert"):
            self.hoisted.append(toks)
            return
        decl = cp.parse_declaration(toks) if s.kind == "simple" and toks[0] != "return" else None
        if decl is None:
            self.region(nodes, scope).items.append(("raw", s.pragmas + toks))
            return
        spec, declarators = decl
        if {"__shared__", "static", "constexpr"} & set(spec):
            self.hoisted.append(toks)
            self.constants.update(d.name for d in declarators)
            if "__shared__" in spec or "static" in spec:
                self.per_thread.update(d.name for d in declarators)  # memory: never read ahead of time
            return
        for d in declarators:
            init = d.init[1:] if d.init[:1] == ["="] else d.init
            one = spec + d.ptr + [d.name] + d.dims + d.init + [";"]
            if (d.name not in self.writes and "&" not in d.ptr and d.init and not d.dims
                    and self.uniform(init)):
                v = Var(self, d.name, spec, d.ptr, d.dims, True)
                self.hoisted.append(v)
                if not (set(cp.names(init)) & (set(self.params) | UNIFORM_BUILTINS | self.per_thread)
                        - self.constants) and "const" in spec:
                    self.hoisted.append(one)  # a constant (array sizes may use it)
                    self.constants.add(d.name)
                elif nodes and isinstance(nodes[-1], Region):
                    nodes.insert(len(nodes) - 1, Node("scalar", toks=one))
                else:
                    nodes.append(Node("scalar", toks=one))
            else:
                v = Var(self, d.name, spec, d.ptr, d.dims, False)
                self.hoisted.append(v)
                r = self.region(nodes, scope)
                v.region = r
                r.items.append(("decl", spec, d, v))
                self.per_thread.add(d.name)
            scope.append(v)

    def expand(self, s, scope):
        """s with each call of a barrier __device__ function inlined before it, or None."""
        found = [c for c in cp.calls(s.src, set(self.functions))]
        if not found:
            return None
        out, toks, shift = [], list(s.src), 0
        for start, open_, close in found:
            args = cp.split_top(s.src[open_ + 1:close])
            if any(self.has_barrier(a) for a in args):
                raise Unsupported("a barrier call inside another's arguments")
            pre, result = self.inline(self.functions[s.src[start]], [a for a in args if a], scope)
            out += pre
            repl = [result] if result else ["(", "void", ")", "0"]
            toks[start - shift:close + 1 - shift] = repl
            shift += close + 1 - start - len(repl)
        if toks != ["(", "void", ")", "0", ";"]:
            out.append(_simple(toks))
        return out

    def inline(self, fn, args, scope):
        if fn is None:
            raise Unsupported("an overloaded __device__ function reaches a barrier")
        if fn.nontype or any(p[0] is None for p in fn.params) or len(args) > len(fn.params):
            raise Unsupported("a __device__ function's signature this parser cannot read")
        self.inlined += 1
        n = self.inlined
        if n > 64:
            raise Unsupported("too many inlined calls")
        mapping = {}
        if fn.tparams:
            helper = self.helper(fn)
            dargs = []
            for a in args:
                dargs += self.declval(a, scope) + [","]
            tl = f"gpublas_tl{n}"
            self.hoisted.append(["using", tl, "=", "decltype", "(", helper, "(", *dargs[:-1], ")", ")", ";"])
            for i, tp in enumerate(fn.tparams):
                mapping[tp] = f"gpublas_T{n}_{tp}"
                self.hoisted.append(["using", mapping[tp], "=", "gpublas_sim::TypeAt", "<", str(i), ",", tl, ">", ";"])
        body = cp.parse_block(fn.body)
        for name in _declared(body):
            mapping[name] = f"{name}_i{n}"
        pre = []
        for (ptype, pname, default), arg in zip(fn.params, args + [p[2] for p in fn.params[len(args):]]):
            if not arg:
                raise Unsupported(f"a missing argument of {pname}")
            ptype = cp.rename(ptype, mapping)
            if ptype[-1:] == ["&"] and len(arg) == 1 and cp.is_ident(arg[0]):
                if arg[0] in self.params and arg[0] not in self.per_thread:
                    raise Unsupported("a parameter passed by reference to a barrier function")
                mapping[pname] = arg[0]
            elif ptype[-1:] == ["&"] and "const" not in ptype:
                raise Unsupported("a non-variable passed by reference to a barrier function")
            else:
                mapping[pname] = f"{pname}_i{n}"
                pre.append(_simple([t for t in ptype if t != "&"] + [mapping[pname], "=", *arg, ";"]))
        body = cp.parse_block(cp.rename(fn.body, mapping))
        self.writes |= cp.written(cp.rename(fn.body, mapping), refs=self.refs) | {mapping[p[1]] for p in fn.params}
        result = None
        if fn.ret != ["void"]:
            if not body or body[-1].src[:1] != ["return"]:
                raise Unsupported("a barrier function that does not end with its return")
            result = f"gpublas_ret{n}"
            pre.insert(0, _simple(cp.rename(fn.ret, mapping) + [result, ";"]))
            body[-1] = _simple([result, "="] + body[-1].src[1:])
        elif body and body[-1].src == ["return", ";"]:
            body.pop()
        if any("return" in s.src for s in body):
            raise Unsupported("a return before the end of a barrier function")
        return pre + body, result

    def helper(self, fn):
        """A declaration-only twin of fn returning TypeList<its template arguments>, whose type
        under decltype gives the arguments the compiler deduces at a call."""
        name = f"gpublas_deduce_{fn.name}"
        if name not in self.helpers:
            tps = [x for tp in fn.tparams for x in ("class", tp, ",")][:-1]
            self.helpers[name] = ["template", "<", *tps, ">", "gpublas_sim::TypeList", "<",
                                  *[x for tp in fn.tparams for x in (tp, ",")][:-1], ">", name, "(",
                                  *fn.signature, ")", ";"]
        return name

    def declval(self, toks, scope):
        """toks with each variable named as std::declval<its type&>(), for the function's top."""
        out = []
        by_name = {v.name: v for v in scope}
        for k, t in enumerate(toks):
            v = by_name.get(t)
            if v is not None and (k == 0 or toks[k - 1] not in (".", "->", "::")) and v not in self.param_vars:
                v.alias_needed = True
                out += ["std::declval", "<", v.alias, "&", ">", "(", ")"]
            else:
                out.append(t)
        return out

    def intrinsic(self, nodes, s, scope):
        """A statement with one warp intrinsic or barrier: its boundary; what remains of it."""
        found = cp.calls(s.src, BARRIERS)
        if len(found) != 1:
            raise Unsupported("several barriers or warp intrinsics in one statement")
        start, open_, close = found[0]
        name, args = s.src[start], cp.split_top(s.src[open_ + 1:close])
        if name in ("__syncthreads", "__syncwarp"):
            if start != 0 or close + 2 != len(s.src):
                raise Unsupported(f"{name}() inside an expression")
            nodes.append(Node("sync" if name == "__syncthreads" else "warp"))
            return []
        if name in SHUFFLES:
            if len(args) not in (3, 4):
                raise Unsupported(f"{name} with {len(args)} arguments")
            value = args[1]
            read = [f"gpublas_sim::{SHUFFLES[name]}", "<", "std::decay_t", "<", "decltype", "(", *value, ")", ">",
                    ">", "(", B, ",", T, ",", *args[0], ",", *[x for a in args[2:] for x in a + [","]][:-1], ")"]
        else:
            if len(args) != 2:
                raise Unsupported(f"{name} with {len(args)} arguments")
            value = (["(", "uint64_t", ")", "(", *args[1], ")"] if name == "__match_any_sync"  # the value itself
                     else ["(", "uint64_t", ")", "(", "(", *args[1], ")", "!=", "0", ")"])
            read = [f"gpublas_sim::{VOTES[name]}", "(", B, ",", T, ",", *args[0], ")"]
        self.region(nodes, scope).items.append(("publish", value))
        nodes.append(Node("warp"))
        return [_simple(s.src[:start] + read + s.src[close + 1:])]

    def loop(self, s, scope):
        body = s.body.body if s.body.kind == "block" else [s.body]
        if self.has_barrier(s.init + s.cond + s.step):
            raise Unsupported("a barrier in a for header")
        inner = list(scope)
        decl = cp.parse_declaration(s.init + [";"]) if s.init else None
        var = decl[1][0].name if decl and len(decl[1]) == 1 else None
        body_toks = [t for b in body for t in b.src]
        by_ref = any(a == [var] for st, o, c in cp.calls(body_toks, set(self.functions))
                     for a in cp.split_top(body_toks[o + 1:c]))
        also = {var} if var else set()
        if (var and var not in cp.written(body_toks, refs=self.refs) and not by_ref and self.uniform(decl[1][0].init[1:])
                and self.uniform(s.cond, also) and self.uniform(s.step, also, step=True)):
            v = Var(self, var, decl[0], decl[1][0].ptr, [], True)
            self.hoisted.append(v)
            inner.append(v)
            self.per_thread.discard(var)
            return Node("ufor", head=["for", "(", *s.init, ";", *s.cond, ";", *s.step, ")"],
                        body=self.block_list(body, inner))
        nodes = []
        if s.init:
            self.add_plain(nodes, _simple(s.init + [";"]), inner)
        flag, saved = self.flags()
        cond = Region(inner)
        cond.items.append(("raw", [flag, "[", T, "]", "=", "(", *(s.cond or ["1"]), ")", "?", "1", ":", "0", ";"]))
        step = Region(inner)
        if s.step:
            step.items.append(("raw", s.step + [";"]))
        nodes.append(Node("mloop", flag=flag, saved=saved, cond=cond, body=self.block_list(body, list(inner)),
                          step=step))
        return Node("scope", body=nodes)

    def branch(self, nodes, s, scope):
        def part(st):
            return [] if st is None else self.block_list(st.body if st.kind == "block" else [st], list(scope))
        if self.has_barrier(s.cond):
            raise Unsupported("a barrier in an if condition")
        if self.uniform(s.cond):
            return [Node("uif", head=["if", "(", *s.cond, ")"], body=part(s.body), orelse=part(s.orelse))]
        flag, saved = self.flags()  # each thread's condition, set at the end of the region before
        set_flag = [flag, "[", T, "]", "=", "(", *s.cond, ")", "?", "1", ":", "0", ";"]
        self.region(nodes, scope).items.append(("raw", set_flag))
        return [Node("mif", flag=flag, saved=saved, body=part(s.body), orelse=part(s.orelse))]

    def flags(self):
        self.ids += 1
        flag, saved = f"gpublas_f{self.ids}", f"gpublas_s{self.ids}"
        for x in (flag, saved):
            self.hoisted.append(["unsigned", "char", "*", x, "=", B, ".", "alloc", "<", "unsigned", "char", ">",
                                 "(", ")", ";"])
        return flag, saved


def _simple(toks):
    s = Stmt("simple", toks)
    s.src = list(toks)
    return s


def _declared(stmts):
    """Names declared anywhere in stmts (nested too)."""
    out = set()
    for s in stmts:
        if s.kind == "simple":
            d = cp.parse_declaration(s.src) if s.src[0] != "return" else None
            out |= {x.name for x in d[1]} if d else set()
        elif s.kind == "for":
            d = cp.parse_declaration(s.init + [";"]) if s.init else None
            out |= {x.name for x in d[1]} if d else set()
            out |= _declared([s.body])
        elif s.kind == "if":
            out |= _declared([x for x in (s.body, s.orelse) if x is not None])
        elif s.kind == "block":
            out |= _declared(s.body)
    return out


def _check_jumps(s, in_loop=False):
    """A break or continue in a region that leaves it (it would jump across a barrier) is refused."""
    if s.kind == "simple" and not in_loop and ({"break", "continue", "goto"} & set(s.src)):
        raise Unsupported("break/continue/goto across a barrier")
    if s.kind == "other":
        if "goto" in s.src or (s.src[0] == "switch" and "continue" in s.src and not in_loop):
            raise Unsupported("goto, or continue out of a switch, across a barrier")
    for sub in ([s.body, s.orelse] if s.kind in ("if", "for") else s.body if s.kind == "block" else []):
        if sub is not None:
            _check_jumps(sub, in_loop or s.kind == "for")
