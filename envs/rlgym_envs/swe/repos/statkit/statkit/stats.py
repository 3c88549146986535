"""Central tendency and spread of a list of numbers."""

import math


def _require(data):
    if not data:
        raise ValueError("need at least one data point")


def mean(data):
    _require(data)
    return sum(data) / len(data)


def median(data):
    """The middle value; the mean of the two middle values for an even number of points."""
    _require(data)
    ordered = sorted(data)
    middle = len(ordered) // 2
    if len(ordered) % 2 == 1:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2


def mode(data):
    """The most common value; among equally common values, the one that appears first."""
    _require(data)
    counts = {}
    for value in data:
        counts[value] = counts.get(value, 0) + 1
    best = max(counts.values())
    for value in data:
        if counts[value] == best:
            return value


def variance(data):
    """The sample variance (divides by n - 1); needs at least two points."""
    if len(data) < 2:
        raise ValueError("variance needs at least two data points")
    centre = mean(data)
    return sum((x - centre) ** 2 for x in data) / (len(data) - 1)


def stdev(data):
    """The sample standard deviation."""
    return math.sqrt(variance(data))


def percentile(data, q):
    """The q-th percentile (0 <= q <= 100) with linear interpolation between the closest ranks."""
    _require(data)
    if not 0 <= q <= 100:
        raise ValueError("q must be between 0 and 100")
    ordered = sorted(data)
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)
