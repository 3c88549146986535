"""Summaries built on the basic statistics: describe, z-scores and histograms."""

from statkit.stats import mean, median, percentile, stdev


def describe(data):
    """A dict of count, mean, median, stdev (None for one point), min, max and the quartiles."""
    return {
        "count": len(data),
        "mean": mean(data),
        "median": median(data),
        "stdev": stdev(data) if len(data) > 1 else None,
        "min": min(data),
        "max": max(data),
        "q1": percentile(data, 25),
        "q3": percentile(data, 75),
    }


def zscores(data):
    """How many sample standard deviations each point lies from the mean (all 0.0 when every point is equal)."""
    centre, spread = mean(data), stdev(data)
    if spread == 0:
        return [0.0 for _ in data]
    return [(x - centre) / spread for x in data]


def histogram(data, bins, low=None, high=None):
    """Counts of points in `bins` equal-width bins over [low, high]; the last bin includes `high`.

    Points outside [low, high] are not counted. `low` and `high` default to the data's min and max.
    """
    if bins < 1:
        raise ValueError("bins must be at least 1")
    low = min(data) if low is None else low
    high = max(data) if high is None else high
    counts = [0] * bins
    if high == low:
        counts[0] = sum(1 for x in data if x == low)
        return counts
    width = (high - low) / bins
    for x in data:
        if x < low or x > high:
            continue
        index = min(int((x - low) / width), bins - 1)
        counts[index] += 1
    return counts
