import unittest

from pqueue import heapsort, nsmallest


class TestHeapsort(unittest.TestCase):
    def test_sorts_numbers(self):
        data = [5, 3, 9, 1, 1, 8, 2, 7, 6, 4, 0, 11, 10]
        self.assertEqual(heapsort(data), sorted(data))

    def test_is_stable(self):
        words = ["pear", "fig", "apple", "kiwi", "plum", "date"]
        self.assertEqual(heapsort(words, key=len), ["fig", "pear", "kiwi", "plum", "date", "apple"])

    def test_empty(self):
        self.assertEqual(heapsort([]), [])


class TestNsmallest(unittest.TestCase):
    def test_n_smallest(self):
        self.assertEqual(nsmallest(3, [7, 1, 9, 3, 5]), [1, 3, 5])

    def test_more_than_available(self):
        self.assertEqual(nsmallest(10, [2, 1]), [1, 2])

    def test_zero(self):
        self.assertEqual(nsmallest(0, [1, 2]), [])
