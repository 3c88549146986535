"""Descriptive statistics for lists of numbers."""

from statkit.stats import mean, median, mode, percentile, stdev, variance
from statkit.summary import describe, histogram, zscores

__all__ = ["describe", "histogram", "mean", "median", "mode", "percentile", "stdev", "variance", "zscores"]
