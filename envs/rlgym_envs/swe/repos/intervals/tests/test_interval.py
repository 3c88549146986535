import unittest

from intervals import Interval


class TestInterval(unittest.TestCase):
    def test_length(self):
        self.assertEqual(Interval(2, 5).length, 3)

    def test_end_before_start_is_an_error(self):
        with self.assertRaises(ValueError):
            Interval(5, 2)

    def test_empty(self):
        self.assertTrue(Interval(3, 3).is_empty())
        self.assertFalse(Interval(3, 4).is_empty())

    def test_contains_start(self):
        self.assertTrue(Interval(1, 4).contains(1))

    def test_contains_inside(self):
        self.assertTrue(Interval(1, 4).contains(2.5))

    def test_end_is_excluded(self):
        self.assertFalse(Interval(1, 4).contains(4))

    def test_empty_interval_contains_nothing(self):
        self.assertFalse(Interval(2, 2).contains(2))

    def test_overlaps(self):
        self.assertTrue(Interval(0, 5).overlaps(Interval(4, 8)))
        self.assertFalse(Interval(0, 5).overlaps(Interval(5, 8)))

    def test_intersection(self):
        self.assertEqual(Interval(0, 5).intersection(Interval(3, 9)), Interval(3, 5))
        self.assertIsNone(Interval(0, 5).intersection(Interval(5, 9)))
