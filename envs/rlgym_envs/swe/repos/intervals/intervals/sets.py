"""Operations on lists of intervals: union (merge), total length, difference and gaps."""

from intervals.interval import Interval


def merge(intervals):
    """The union of `intervals` as a sorted list of disjoint, non-empty intervals.

    Overlapping intervals and intervals that touch ([1, 2) and [2, 3)) become one.
    """
    merged = []
    for current in sorted(iv for iv in intervals if not iv.is_empty()):
        if merged and current.start <= merged[-1].end:
            last = merged[-1]
            merged[-1] = Interval(last.start, max(last.end, current.end))
        else:
            merged.append(current)
    return merged


def total_length(intervals):
    """The length of the union of `intervals` (overlaps are counted once)."""
    return sum(iv.length for iv in merge(intervals))


def subtract(base, holes):
    """The parts of `base` not covered by any of `holes`, as a sorted list of non-empty intervals."""
    pieces = []
    cursor = base.start
    for hole in merge(holes):
        if hole.end <= cursor:
            continue
        if hole.start >= base.end:
            break
        if hole.start > cursor:
            pieces.append(Interval(cursor, hole.start))
        cursor = max(cursor, hole.end)
    if cursor < base.end:
        pieces.append(Interval(cursor, base.end))
    return pieces


def gaps(intervals):
    """The empty stretches between the intervals of the union, from its first start to its last end."""
    merged = merge(intervals)
    return [Interval(a.end, b.start) for a, b in zip(merged, merged[1:])]
