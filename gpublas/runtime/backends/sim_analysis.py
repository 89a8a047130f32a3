"""What the simulator reads from a kernel file's text before g++ compiles it: the #if branches a build takes
(taken_branches: so a build switch such as LN_GPU_FORM chooses what the barrier analysis reads, as it chooses
what g++ compiles), the kernels that reach a barrier or warp intrinsic in those branches (kernels_needing_fibers)
and each kernel's __launch_bounds__ (launch_bounds: the simulator refuses a block past it, as a GPU does)."""
import re

from .. import source
from .sim_cparse import _BARRIERS, closing, function_bodies, is_ident, tokenize

_CONDITIONAL = re.compile(r"^[ \t]*#[ \t]*(?P<kw>if|ifdef|ifndef|elif|else|endif)\b(?P<cond>[^\n]*)$", re.M)
_DEFINED_ON_THE_SIM = {"__CUDA_ARCH_SIM__": True, "__CUDA_ARCH__": False}  # gpublas/runtime/sim/dialect.h's


def _condition(cond, defines, set_in_text):
    """True, False or None (cannot tell) for an #if condition built of defined(X), !, &&, || and
    parentheses. defined(X) is known for the simulator's own macros, the build's defines, and the names
    the text never #defines or #undefs and that are not reserved (`_X`): those are not defined."""
    def defined(name):
        if name in defines:
            return True
        if name in _DEFINED_ON_THE_SIM:
            return _DEFINED_ON_THE_SIM[name]
        return None if name in set_in_text or name.startswith("_") else False

    def expr(toks):  # toks: the condition's tokens; || binds loosest, then &&
        for op, combine in (("||", any), ("&&", all)):
            parts, depth, cur = [], 0, []
            for t in toks:
                depth += {"(": 1, ")": -1}.get(t, 0)
                if t == op and depth == 0:
                    parts.append(cur)
                    cur = []
                else:
                    cur.append(t)
            if parts:
                values = [expr(p) for p in parts + [cur]]
                stop = op == "&&"  # a False decides &&, a True decides ||
                if any(v is not None and v != stop for v in values):
                    return not stop
                return None if None in values else stop
        if toks[:1] == ["!"]:
            v = expr(toks[1:])
            return None if v is None else not v
        if toks[:1] == ["("] and toks[-1:] == [")"] and closing(toks, 0) == len(toks) - 1:
            return expr(toks[1:-1])
        if toks[:1] == ["defined"]:
            name = [t for t in toks[1:] if t not in "()"]
            return defined(name[0]) if len(name) == 1 and is_ident(name[0]) else None
        return None

    return expr(tokenize(cond))


def taken_branches(text, defines=None):
    """`text` with the lines of the #if / #ifdef / #elif / #else branches the simulator's compiler will
    not take blanked (line count and the directives kept), where _condition can tell; a branch it cannot
    tell is kept, as is every branch after it in its chain. So a build switch (`#if defined(__CUDA_ARCH_SIM__)
    && !defined(LN_GPU_FORM)`) chooses what the barrier analysis reads, as it chooses what g++ compiles."""
    defines = set(defines or ())
    set_in_text = set(re.findall(r"^[ \t]*#[ \t]*(?:define|undef)[ \t]+(\w+)", text, re.M))
    lines = text.split("\n")
    stack = []  # per open #if: [this branch kept, a branch of the chain surely taken, the chain undecided]
    for i, line in enumerate(lines):
        m = _CONDITIONAL.match(line)
        if m is None:
            if not all(level[0] for level in stack):
                lines[i] = ""
            continue
        kw, cond = m["kw"], m["cond"].split("//")[0].strip()
        if kw in ("if", "ifdef", "ifndef", "elif"):
            cond = {"ifdef": f"defined({cond})", "ifndef": f"!defined({cond})"}.get(kw, cond)
            value = None if cond.endswith("\\") else _condition(cond, defines, set_in_text)
        else:
            value = True
        if kw in ("if", "ifdef", "ifndef"):
            stack.append([value is not False, value is True, value is None])
        elif kw in ("elif", "else") and stack:
            _, taken, undecided = stack[-1]
            value = None if undecided and value is not False else value
            stack[-1] = [not taken and value is not False, taken or value is True, undecided or value is None]
        elif kw == "endif" and stack:
            stack.pop()
    return "\n".join(lines)


def kernels_needing_fibers(text, defines=None):
    """Names of the functions that reach a barrier or warp intrinsic, directly or through the
    functions they call (plain or template calls), in the branches of the build (taken_branches:
    `defines`, a dict or set of names, and the simulator's). Kernels not named take the simulator's fast
    path (a plain loop over threads); one that reaches a barrier anyway is reported at launch."""
    # no preprocessor lines, a directive's backslash-continued lines included (a multi-line #define)
    text = taken_branches(source.strip_comments(text), defines)
    text = re.sub(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*$", "", text, flags=re.M)
    bodies = function_bodies(text)
    barrier = {n for n, b in bodies.items() if _BARRIERS.search(b)}
    changed = True
    while changed:
        changed = False
        for n, b in bodies.items():
            if n not in barrier and any(re.search(rf"\b{re.escape(c)}\s*(?:<[^;{{}}]*?>)?\s*\(", b) for c in barrier):
                barrier.add(n)
                changed = True
    return barrier


_BOUNDS = re.compile(r"__launch_bounds__\s*\(\s*(?P<threads>\w+)\s*(?:,[^()]*)?\)\s*(?P<name>\w+)\s*\(")
_INT_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)[ \t]+(\d+)[uUlL]*[ \t]*(?://.*)?$", re.M)


def launch_bounds(text, defines=None):
    """{kernel: the most threads a block of it may have} from the __launch_bounds__ of the kernels of `text`,
    where the bound is an integer or a macro with an integer value (the build's defines first, then the text's
    #defines); a GPU refuses a larger block, and so does the simulator (its kernel_limits)."""
    values = {**dict(_INT_DEFINE.findall(text)), **{k: str(v) for k, v in (defines or {}).items()}}
    found = {}
    for m in _BOUNDS.finditer(source.strip_comments(text)):
        threads = values.get(m["threads"], m["threads"])
        if threads.isdigit():
            found[m["name"]] = int(threads)
    return found
