"""Sorting helpers built on `PriorityQueue`."""

from pqueue.heap import PriorityQueue


def heapsort(items, key=None):
    """A new list of `items` in ascending order of `key(item)` (the item itself by default). Stable."""
    queue = PriorityQueue()
    for item in items:
        queue.push(item, item if key is None else key(item))
    return [queue.pop() for _ in range(len(queue))]


def nsmallest(n, items, key=None):
    """The `n` smallest items in ascending order (fewer when there are fewer items)."""
    if n <= 0:
        return []
    return heapsort(items, key)[:n]
