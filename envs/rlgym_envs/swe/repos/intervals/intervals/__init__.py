"""Half-open numeric intervals [start, end) and operations on lists of them."""

from intervals.interval import Interval
from intervals.sets import gaps, merge, subtract, total_length

__all__ = ["Interval", "gaps", "merge", "subtract", "total_length"]
