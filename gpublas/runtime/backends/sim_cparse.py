"""Just enough of CUDA C++ for the sim backend's loop fission (sim_fission.py): tokens, statements
of a function body, declarations, calls, and which names a statement writes.

It reads the statement structure of a kernel body (blocks, for, if, the rest opaque) and the shape
of a declaration (`const real* p = x, q[4];`), never expressions' meaning. Anything it does not
recognise raises Unsupported, and the caller keeps that kernel on fibers. Before any of that, the
sim backend asks which kernels reach a barrier at all (kernels_needing_fibers: the others run as a
plain loop over threads) and rewrites `extern __shared__` arrays (translate).
"""
import re


_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<pp>\#(?:\\\n|\\.|[^\n\\])*)
  | (?P<str>"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')
  | (?P<num>(?:\d|\.\d)(?:[eEpP][+-]|[\w.])*)
  | (?P<id>[A-Za-z_]\w*)
  | (?P<op>::|->|\+\+|--|<<=|>>=|<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%&|^]=|[{}()\[\];,.<>?:=+\-*/%&|^!~])
""", re.X)
ASSIGN = {"=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>="}
BUILTIN_TYPES = {"int", "float", "double", "char", "bool", "void", "long", "short", "unsigned", "signed"}
QUALIFIERS = {"const", "constexpr", "static", "volatile", "__shared__", "__restrict__", "__restrict", "register",
              "inline", "__device__", "__forceinline__", "typename"}
ATTRIBUTES = {"__align__", "__attribute__", "alignas"}
KEYWORDS = {"return", "if", "else", "for", "while", "do", "switch", "case", "default", "break", "continue",
            "goto", "sizeof", "new", "delete", "throw", "using", "typedef", "static_assert", "template",
            "true", "false", "nullptr", "this", "operator", "decltype", "alignof"}


class Unsupported(Exception):
    """A construct the fission transform does not handle: the kernel keeps its fibers."""


def tokenize(text):
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise Unsupported(f"cannot tokenize {text[pos:pos + 20]!r}")
        if m.lastgroup != "ws":
            out.append(m.group())
        pos = m.end()
    return out


def is_ident(tok):
    return tok[:1].isalpha() or tok[:1] == "_"


def after_angles(toks, i):
    """Index after the template argument list opening at toks[i] ('<')."""
    depth = 0
    while i < len(toks):
        depth += {"<": 1, ">": -1, ">>": -2}.get(toks[i], 0)
        i += 1
        if depth <= 0:
            break
    return i


def closing(toks, i):
    """Index of the bracket closing toks[i] ('(', '[' or '{')."""
    pairs, depth = {"(": ")", "[": "]", "{": "}"}, 0
    for j in range(i, len(toks)):
        if toks[j] in pairs:
            depth += 1
        elif toks[j] in (")", "]", "}"):
            depth -= 1
            if depth == 0:
                return j
    raise Unsupported("unbalanced brackets")


def split_top(toks, sep=","):
    """toks split at `sep` outside brackets and template argument lists."""
    parts, cur, depth, angle = [], [], 0, 0
    for k, t in enumerate(toks):
        if t in "([{":
            depth += 1
        elif t in ")]}":
            depth -= 1
        elif t == "<" and sep == "," and k and is_ident(toks[k - 1]) and depth == 0:
            angle += 1
        elif t == ">" and angle and depth == 0:
            angle -= 1
        elif t == ">>" and angle and depth == 0:
            angle = max(0, angle - 2)
        if t == sep and depth == 0 and angle == 0:
            parts.append(cur)
            cur = []
        else:
            cur.append(t)
    parts.append(cur)
    return parts


class Stmt:
    """kind: 'simple' (toks up to and with ';'), 'block' (body), 'for' (init, cond, step, body),
    'if' (cond, body, orelse) or 'other' (while/do/switch, a macro taking the next statement: toks).
    .src: its tokens; pragmas: the '#pragma' lines before it."""

    def __init__(self, kind, toks=(), body=None, init=None, cond=None, step=None, orelse=None, pragmas=()):
        self.kind, self.toks, self.body, self.orelse = kind, list(toks), body, orelse
        self.init, self.cond, self.step, self.pragmas = init, cond, step, list(pragmas)


def parse_block(toks):
    """The statements of a brace-less token list (a function body's inside)."""
    out, i = [], 0
    while i < len(toks):
        s, i = parse_stmt(toks, i)
        out.append(s)
    return out


def parse_stmt(toks, i):
    """(the statement starting at toks[i], the index after it); .src holds its tokens (no pragmas)."""
    pragmas = []
    while i < len(toks) and toks[i].startswith("#"):
        if not re.match(r"#\s*pragma\b", toks[i]):
            raise Unsupported(f"preprocessor line inside the function: {toks[i]}")
        pragmas.append(toks[i])
        i += 1
    s, k = _parse_stmt(toks, i, pragmas)
    s.src = toks[i:k]
    return s, k


def _parse_stmt(toks, i, pragmas):
    if i >= len(toks):
        raise Unsupported("a #pragma at the end of a block")
    t = toks[i]
    if t == "{":
        j = closing(toks, i)
        return Stmt("block", body=parse_block(toks[i + 1:j]), pragmas=pragmas), j + 1
    if t == "for":
        j = closing(toks, i + 1)
        parts = split_top(toks[i + 2:j], ";")
        if len(parts) != 3:
            raise Unsupported("a range-based for")
        body, k = parse_stmt(toks, j + 1)
        return Stmt("for", init=parts[0], cond=parts[1], step=parts[2], body=body, pragmas=pragmas), k
    if t == "if":
        if toks[i + 1] != "(":
            raise Unsupported("if constexpr")
        j = closing(toks, i + 1)
        body, k = parse_stmt(toks, j + 1)
        orelse = None
        if k < len(toks) and toks[k] == "else":
            orelse, k = parse_stmt(toks, k + 1)
        return Stmt("if", cond=toks[i + 2:j], body=body, orelse=orelse, pragmas=pragmas), k
    if t in ("while", "switch"):
        j = closing(toks, i + 1)
        _, k = parse_stmt(toks, j + 1)
        return Stmt("other", toks[i:k], pragmas=pragmas), k
    if t == "do":
        _, k = parse_stmt(toks, i + 1)
        k = closing(toks, k + 1) + 2  # while ( ... ) ;
        return Stmt("other", toks[i:k], pragmas=pragmas), k
    if is_ident(t) and i + 1 < len(toks) and toks[i + 1] == "(" and t not in KEYWORDS:
        j = closing(toks, i + 1) + 1
        if j < len(toks) and (toks[j] == "{" or (is_ident(toks[j]) and toks[j] not in KEYWORDS)):
            _, k = parse_stmt(toks, j)  # a macro taking the next statement, as GRID_STRIDE_LOOP does
            return Stmt("other", toks[i:k], pragmas=pragmas), k
    if is_ident(t) and i + 1 < len(toks) and toks[i + 1] == ":" and t not in ("default", "public", "private"):
        raise Unsupported(f"a label ({t}:)")
    j, depth = i, 0
    while j < len(toks):
        if toks[j] in "([{":
            depth += 1
        elif toks[j] in ")]}":
            depth -= 1
        elif toks[j] == ";" and depth == 0:
            return Stmt("simple", toks[i:j + 1], pragmas=pragmas), j + 1
        j += 1
    raise Unsupported("a statement without ';'")


class Declarator:
    def __init__(self, ptr, name, dims, init):
        self.ptr, self.name, self.dims, self.init = ptr, name, dims, init  # init: tokens with '='/'('/'{' or []


def parse_declaration(toks):
    """(spec tokens, [Declarator]) when the statement toks (ending with ';') declares variables,
    else None. `for (int i = 0; ...)`'s init is passed with a ';' appended."""
    body = toks[:-1]
    k, builtin = 0, False
    while k < len(body) and (body[k] in QUALIFIERS or body[k] in BUILTIN_TYPES or body[k] in ATTRIBUTES):
        if body[k] in ATTRIBUTES:
            if k + 1 >= len(body) or body[k + 1] != "(":
                return None
            k = closing(body, k + 1) + 1
            continue
        builtin |= body[k] in BUILTIN_TYPES
        k += 1
    if not builtin:
        if k >= len(body) or not is_ident(body[k]) or body[k] in KEYWORDS:
            return None
        k += 1  # the type name, qualified and templated
        while True:
            if k < len(body) and body[k] == "::" and k + 1 < len(body) and is_ident(body[k + 1]):
                k += 2
            elif k < len(body) and body[k] == "<":
                k = after_angles(body, k)
            else:
                break
        while k < len(body) and body[k] in QUALIFIERS:
            k += 1
    spec = body[:k]
    decls = []
    for part in split_top(body[k:]):
        j = 0
        while j < len(part) and part[j] in ("*", "&", "&&", "const", "__restrict__", "__restrict", "volatile"):
            j += 1
        if j >= len(part) or not is_ident(part[j]) or part[j] in KEYWORDS:
            return None
        name, j = part[j], j + 1
        dims_start = j
        while j < len(part) and part[j] == "[":
            j = closing(part, j) + 1
        dims, init = part[dims_start:j], part[j:]
        if init and init[0] not in ("=", "{", "("):
            return None
        decls.append(Declarator(part[:dims_start - 1], name, dims, init))
    return (spec, decls) if decls else None


def names(toks):
    """The identifiers of toks that name something (not a member after '.' or '->')."""
    return {t for k, t in enumerate(toks) if is_ident(t) and (k == 0 or toks[k - 1] not in (".", "->", "::"))}


def written(toks, through_index=True, refs=None):
    """Names toks may write: assigned (also through .member, and [i] when through_index), incremented,
    whose address is taken, or (refs: reference_params of the source) passed to a non-const reference."""
    out = reference_arguments(toks, refs) if refs else set()
    for k, t in enumerate(toks):
        if not is_ident(t) or (k and toks[k - 1] in (".", "->", "::")):
            continue
        prev = toks[k - 1] if k else ""
        if prev in ("++", "--"):
            out.add(t)
        before = toks[k - 2] if k >= 2 else ""
        if prev == "&" and not (is_ident(before) or before in (")", "]") or before[:1].isdigit()):
            out.add(t)  # &name: its address taken
        j = k + 1
        while j < len(toks) and ((toks[j] == "[" and through_index) or (toks[j] == "." and j + 1 < len(toks))):
            j = closing(toks, j) + 1 if toks[j] == "[" else j + 2
        if j < len(toks) and (toks[j] in ASSIGN or toks[j] in ("++", "--")):
            out.add(t)
    return out


def reference_params(toks):
    """{function: positions of its non-const reference parameters} for the functions toks defines (a name's
    overloads together): a call may write the variable it passes there (`p` of f(const float*& p) too)."""
    out = {}
    for k in range(len(toks) - 1):
        t = toks[k]
        if not is_ident(t) or t in KEYWORDS or toks[k + 1] != "(" or (k and toks[k - 1] in (".", "->", "::")):
            continue
        close = closing(toks, k + 1)
        if close + 1 >= len(toks) or toks[close + 1] != "{":
            continue  # a call, not a definition
        for i, p in enumerate(split_top(toks[k + 2:close])):
            kind = p[:p.index("=")] if "=" in p else p
            kind = kind[:-1] if kind and is_ident(kind[-1]) else kind  # the type, less the parameter's name
            if kind[-1:] in (["&"], ["&&"]):
                star = max((j for j, x in enumerate(kind) if x == "*"), default=-1)
                if "const" not in kind[star + 1:-1]:  # the referred-to object (a pointer itself, after a '*')
                    out.setdefault(t, set()).add(i)
    return out


def reference_arguments(toks, refs):
    """The variables toks passes to the non-const reference parameters `refs` (reference_params) names."""
    out = set()
    for k, t in enumerate(toks):
        if t not in refs or (k and toks[k - 1] in (".", "->", "::")):
            continue
        j = after_angles(toks, k + 1) if k + 1 < len(toks) and toks[k + 1] == "<" else k + 1  # template arguments
        if j < len(toks) and toks[j] == "(":
            for i, a in enumerate(split_top(toks[j + 1:closing(toks, j)])):
                if i in refs[t] and a and is_ident(a[0]) and (len(a) == 1 or a[1] in (".", "[")):
                    out.add(a[0])
    return out


def calls(toks, wanted):
    """[(start, open paren, close paren)] of the calls of the names in `wanted` (with template
    arguments if any), outermost first."""
    out, k = [], 0
    while k < len(toks):
        t = toks[k]
        if t in wanted and (k == 0 or toks[k - 1] not in (".", "->")):
            j = k + 1
            if j < len(toks) and toks[j] == "<":
                raise Unsupported(f"explicit template arguments in a call of {t}")
            if j < len(toks) and toks[j] == "(":
                close = closing(toks, j)
                out.append((k, j, close))
                k = close + 1
                continue
        k += 1
    return out


def rename(toks, mapping):
    """toks with identifiers renamed (members after '.', '->' and '::' left alone)."""
    return [mapping.get(t, t) if is_ident(t) and (k == 0 or toks[k - 1] not in (".", "->", "::")) else t
            for k, t in enumerate(toks)]


def text(toks):
    """Tokens back to source, one statement a line; '#' lines get lines of their own."""
    out = []
    for t in toks:
        if t.startswith("#"):
            out.append("\n" + t + "\n")
        else:
            out.append(t + ("\n" if t in (";", "{", "}") else " "))
    return "".join(out)


_EXTERN_SHARED = re.compile(
    r"extern\s+__shared__\s+(?:__align__\s*\(\s*\d+\s*\)\s*)?(?P<type>[\w\s]+?)\s+"
    r"(?:__align__\s*\(\s*\d+\s*\)\s*)?(?P<name>\w+)\s*\[\s*\]\s*;")
_BARRIERS = re.compile(r"\b(__syncthreads\w*|__syncwarp|__shfl\w*_sync|__ballot_sync|__any_sync|__all_sync|__match_any_sync"
                       r"|__activemask|wmma::\w+_sync|mma_sync_\w+|ldmatrix_sync_\w+|wgmma_m64nNk\d+_\w+)\b")
_ATTRIBUTES = r"__launch_bounds__|__align__|__attribute__|__declspec|alignas|if|for|while|switch|return"
_HEADER_NAME = re.compile(rf"\b(?P<name>(?!(?:{_ATTRIBUTES})\b)[A-Za-z_]\w*)\s*\(")


def function_bodies(text):
    """{name: body} for every function defined in `text` (comments stripped), at file scope or
    inside namespaces, structs and extern "C" blocks. The name is the identifier before the first
    '(' of the header that is not an attribute (so `real (*As)[BM]` parameters and templates work)."""
    bodies, depth, i, header_start = {}, 0, 0, 0
    while i < len(text):
        ch = text[i]
        if ch in ";}":
            header_start = i + 1
        elif ch == "{":
            header = text[header_start:i]
            m = _HEADER_NAME.search(header)
            if m is None:  # namespace, struct, extern "C" { ... }: look inside
                header_start = i + 1
            else:
                depth, j = 1, i + 1
                while j < len(text) and depth:
                    depth += {"{": 1, "}": -1}.get(text[j], 0)
                    j += 1
                bodies[m.group("name")] = text[i + 1:j - 1]
                i, header_start = j, j
                continue
        i += 1
    return bodies


def translate(text):
    """The .cu text as the host compiler sees it: `extern __shared__ T name[];` becomes a pointer to
    the block's dynamic shared memory (same line count, so compiler messages keep their lines)."""
    return _EXTERN_SHARED.sub(
        lambda m: f"{m['type']}* {m['name']} = ({m['type']}*)gpublas_sim::dynamic_shared();", text)
