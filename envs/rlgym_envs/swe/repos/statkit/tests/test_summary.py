import unittest

from statkit import describe, histogram, zscores


class TestDescribe(unittest.TestCase):
    def test_fields(self):
        summary = describe([1, 2, 3, 4, 5])
        self.assertEqual((summary["count"], summary["min"], summary["max"]), (5, 1, 5))
        self.assertEqual((summary["median"], summary["q1"], summary["q3"]), (3, 2, 4))

    def test_single_point_has_no_stdev(self):
        self.assertIsNone(describe([7])["stdev"])


class TestZscores(unittest.TestCase):
    def test_symmetric(self):
        scores = zscores([1, 2, 3])
        self.assertAlmostEqual(scores[0], -1.0)
        self.assertAlmostEqual(scores[1], 0.0)
        self.assertAlmostEqual(scores[2], 1.0)

    def test_constant_data(self):
        self.assertEqual(zscores([4, 4, 4]), [0.0, 0.0, 0.0])


class TestHistogram(unittest.TestCase):
    def test_counts(self):
        self.assertEqual(histogram([0, 1, 2, 3, 4, 5, 6, 7, 8, 9], 5), [2, 2, 2, 2, 2])

    def test_maximum_goes_in_the_last_bin(self):
        self.assertEqual(histogram([0, 5, 10], 2), [1, 2])

    def test_points_outside_the_range_are_ignored(self):
        self.assertEqual(histogram([-1, 0, 1, 2, 3], 2, low=0, high=2), [1, 2])

    def test_all_equal(self):
        self.assertEqual(histogram([3, 3], 4), [2, 0, 0, 0])
