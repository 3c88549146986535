"""`PriorityQueue`: a binary min-heap of (priority, sequence number, item) entries."""


class PriorityQueue:
    """Lowest priority first; among equal priorities, the item pushed first comes out first."""

    def __init__(self):
        self._heap = []  # entries (priority, seq, item); seq breaks ties and is never equal
        self._seq = 0

    def __len__(self):
        return len(self._heap)

    def push(self, item, priority):
        self._heap.append((priority, self._seq, item))
        self._seq += 1
        self._sift_up(len(self._heap) - 1)

    def peek(self):
        if not self._heap:
            raise IndexError("peek from an empty priority queue")
        return self._heap[0][2]

    def pop(self):
        """Remove and return the item with the lowest priority."""
        if not self._heap:
            raise IndexError("pop from an empty priority queue")
        last = self._heap.pop()
        if not self._heap:
            return last[2]
        top = self._heap[0]
        self._heap[0] = last
        self._sift_down(0)
        return top[2]

    def remove(self, item):
        """Remove `item` (the first entry equal to it); `KeyError` if it is not queued."""
        for index, entry in enumerate(self._heap):
            if entry[2] == item:
                break
        else:
            raise KeyError(item)
        last = self._heap.pop()
        if index < len(self._heap):
            self._heap[index] = last
            self._sift_down(index)
            self._sift_up(index)

    def update(self, item, priority):
        """Give a queued `item` a new priority (it queues behind items already at that priority)."""
        self.remove(item)
        self.push(item, priority)

    def _sift_up(self, index):
        heap = self._heap
        while index > 0:
            parent = (index - 1) // 2
            if heap[index] < heap[parent]:
                heap[index], heap[parent] = heap[parent], heap[index]
                index = parent
            else:
                break

    def _sift_down(self, index):
        heap = self._heap
        size = len(heap)
        while True:
            left = 2 * index + 1
            right = left + 1
            smallest = index
            if left < size and heap[left] < heap[smallest]:
                smallest = left
            if right < size and heap[right] < heap[smallest]:
                smallest = right
            if smallest == index:
                return
            heap[index], heap[smallest] = heap[smallest], heap[index]
            index = smallest
