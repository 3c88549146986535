"""A binary-heap priority queue with FIFO ties, removal and re-prioritisation."""

from pqueue.heap import PriorityQueue
from pqueue.sorting import heapsort, nsmallest

__all__ = ["PriorityQueue", "heapsort", "nsmallest"]
