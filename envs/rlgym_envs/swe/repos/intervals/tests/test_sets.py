import unittest

from intervals import Interval, gaps, merge, subtract, total_length


def iv(a, b):
    return Interval(a, b)


class TestMerge(unittest.TestCase):
    def test_disjoint_intervals_are_sorted(self):
        self.assertEqual(merge([iv(5, 6), iv(1, 2)]), [iv(1, 2), iv(5, 6)])

    def test_overlapping_intervals_merge(self):
        self.assertEqual(merge([iv(1, 4), iv(3, 7)]), [iv(1, 7)])

    def test_touching_intervals_merge(self):
        self.assertEqual(merge([iv(1, 2), iv(2, 3)]), [iv(1, 3)])

    def test_nested_interval_is_absorbed(self):
        self.assertEqual(merge([iv(0, 10), iv(2, 3), iv(4, 5)]), [iv(0, 10)])

    def test_empty_intervals_are_dropped(self):
        self.assertEqual(merge([iv(3, 3), iv(1, 2)]), [iv(1, 2)])

    def test_nothing(self):
        self.assertEqual(merge([]), [])


class TestTotalLength(unittest.TestCase):
    def test_overlaps_count_once(self):
        self.assertEqual(total_length([iv(0, 4), iv(2, 6)]), 6)

    def test_disjoint(self):
        self.assertEqual(total_length([iv(0, 1), iv(5, 7)]), 3)

    def test_nested(self):
        self.assertEqual(total_length([iv(0, 10), iv(1, 2)]), 10)


class TestSubtract(unittest.TestCase):
    def test_hole_in_the_middle(self):
        self.assertEqual(subtract(iv(0, 10), [iv(3, 5)]), [iv(0, 3), iv(5, 10)])

    def test_hole_at_the_start_leaves_no_empty_piece(self):
        self.assertEqual(subtract(iv(0, 10), [iv(0, 4)]), [iv(4, 10)])

    def test_adjacent_holes_leave_no_empty_piece(self):
        self.assertEqual(subtract(iv(0, 10), [iv(2, 4), iv(6, 8)]), [iv(0, 2), iv(4, 6), iv(8, 10)])

    def test_holes_outside(self):
        self.assertEqual(subtract(iv(0, 10), [iv(-5, -1), iv(20, 30)]), [iv(0, 10)])

    def test_everything_covered(self):
        self.assertEqual(subtract(iv(0, 10), [iv(-1, 11)]), [])


class TestGaps(unittest.TestCase):
    def test_gaps_between(self):
        self.assertEqual(gaps([iv(0, 1), iv(3, 4), iv(6, 9)]), [iv(1, 3), iv(4, 6)])

    def test_no_gaps_when_touching(self):
        self.assertEqual(gaps([iv(0, 1), iv(1, 2)]), [])
