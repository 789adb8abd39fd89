"""What the Python benchmark scripts in tools/ share: sizes as the command lines write them
and the percentile the C++ benchmarks report (nearest rank, as comm_bench computes it)."""


def parse_size(s):
    """'8' -> 8, '1K' -> 1024, '64M' -> 67108864."""
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    s = s.strip()
    if s and s[-1].upper() in mult:
        return int(float(s[:-1]) * mult[s[-1].upper()])
    return int(s)


def percentile(v, p):
    """The nearest-rank p-th percentile of the samples v."""
    v = sorted(v)
    k = max(1, min(len(v), int(-(-p * len(v) // 100))))
    return v[k - 1]
