"""The `Interval` value type: a half-open range [start, end) of numbers."""

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Interval:
    """The numbers x with start <= x < end. An interval with start == end is empty."""

    start: float
    end: float

    def __post_init__(self):
        if self.end < self.start:
            raise ValueError(f"interval end {self.end} is before its start {self.start}")

    @property
    def length(self):
        return self.end - self.start

    def is_empty(self):
        return self.start == self.end

    def contains(self, x):
        """Whether the number x lies in the interval (the end is excluded)."""
        return self.start <= x < self.end

    def overlaps(self, other):
        """Whether the two intervals share at least one number."""
        return self.start < other.end and other.start < self.end

    def intersection(self, other):
        """The common part of the two intervals, or None when they do not overlap."""
        start, end = max(self.start, other.start), min(self.end, other.end)
        if start < end:
            return Interval(start, end)
        return None
