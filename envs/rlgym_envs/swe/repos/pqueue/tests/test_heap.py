import unittest

from pqueue import PriorityQueue

VALUES = [31, 4, 15, 9, 26, 5, 35, 8, 97, 93, 23, 84, 62, 64, 33, 83, 27, 95, 2, 88]


def drain(queue):
    return [queue.pop() for _ in range(len(queue))]


class TestPriorityQueue(unittest.TestCase):
    def test_pops_in_priority_order(self):
        queue = PriorityQueue()
        for value in VALUES:
            queue.push(value, value)
        self.assertEqual(drain(queue), sorted(VALUES))

    def test_pops_descending_input_in_order(self):
        queue = PriorityQueue()
        for value in range(12, 0, -1):
            queue.push(value, value)
        self.assertEqual(drain(queue), list(range(1, 13)))

    def test_pops_mixed_input_in_order(self):
        queue = PriorityQueue()
        for value in [19, 7, 2, 1, 18, 15, 13]:
            queue.push(value, value)
        self.assertEqual(drain(queue), [1, 2, 7, 13, 15, 18, 19])

    def test_equal_priorities_are_fifo(self):
        queue = PriorityQueue()
        for name in ["first", "second", "third"]:
            queue.push(name, 1)
        queue.push("urgent", 0)
        self.assertEqual(drain(queue), ["urgent", "first", "second", "third"])

    def test_peek_does_not_remove(self):
        queue = PriorityQueue()
        queue.push("a", 2)
        queue.push("b", 1)
        self.assertEqual(queue.peek(), "b")
        self.assertEqual(len(queue), 2)

    def test_empty_queue_errors(self):
        queue = PriorityQueue()
        with self.assertRaises(IndexError):
            queue.pop()
        with self.assertRaises(IndexError):
            queue.peek()

    def test_remove_keeps_the_heap_order(self):
        queue = PriorityQueue()
        for value in [16, 18, 12, 14, 1, 11, 8]:
            queue.push(value, value)
        queue.remove(18)
        self.assertEqual(drain(queue), [1, 8, 11, 12, 14, 16])

    def test_remove_last_item(self):
        queue = PriorityQueue()
        queue.push("a", 1)
        queue.push("b", 2)
        queue.remove("b")
        self.assertEqual(drain(queue), ["a"])

    def test_remove_missing_item(self):
        with self.assertRaises(KeyError):
            PriorityQueue().remove("nope")

    def test_update_changes_priority(self):
        queue = PriorityQueue()
        for name, priority in [("a", 1), ("b", 2), ("c", 3)]:
            queue.push(name, priority)
        queue.update("c", 0)
        self.assertEqual(drain(queue), ["c", "a", "b"])
