"""Text for the benchmark reports: sizes and values formatted, aligned tables, sizes and shapes parsed
from the command line (benchmarks.harness re-exports every name)."""
import math
import re


def fmt_bytes(n):
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if n == int(n) else f"{n:.1f} {unit}"
        n /= 1024


def fmt(value, spec):
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if callable(spec):
        return spec(value)
    if isinstance(value, str):
        return value
    return format(value, spec)


def table(columns, rows):
    """Aligned text table: columns [(key, header, format spec or callable)], rows of dicts. Columns
    with no value in any row are left out; a repeated value in the first column is printed once."""
    columns = [c for c in columns if any(r.get(c[0]) is not None for r in rows)]
    cells = [[h for _, h, _ in columns]]
    prev = None
    for r in rows:
        line = [fmt(r.get(k), f) for k, _, f in columns]
        prev, line[0] = line[0], ("" if line[0] == prev else line[0])
        cells.append(line)
    widths = [max(len(c[i]) for c in cells) for i in range(len(columns))]
    right = [all(_numeric(c[i]) or c[i] in ("-", "") for c in cells[1:]) for i in range(len(columns))]
    out = []
    for j, line in enumerate(cells):
        out.append("  ".join(c.rjust(w) if r else c.ljust(w)
                             for c, w, r in zip(line, widths, right)).rstrip())
        if j == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def _numeric(s):
    return bool(re.match(r"^[-+]?[\d.]+(e[-+]?\d+)?\s*[a-zA-Z%µ/]*$", s))


def parse_size(text):
    """'4096', '4K', '16MiB', '1G' -> a number of units (K = 1024)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b)?\s*", text.lower())
    if not m:
        raise ValueError(f"cannot read size '{text}': use e.g. 4096, 64K, 16M, 1G")
    scale = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}[m.group(2)]
    return int(float(m.group(1)) * scale)


def parse_shape(text):
    """'256' -> (256, 256, 256); '256x4096x1024' -> (256, 4096, 1024) as (M, N, K)."""
    parts = [parse_size(p) for p in text.lower().split("x")]
    if len(parts) == 1:
        return (parts[0],) * 3
    if len(parts) == 3:
        return tuple(parts)
    raise ValueError(f"cannot read shape '{text}': use N or MxNxK")
