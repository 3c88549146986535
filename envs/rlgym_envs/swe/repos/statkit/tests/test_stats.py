import math
import unittest

from statkit import mean, median, mode, percentile, stdev, variance


class TestCentre(unittest.TestCase):
    def test_mean(self):
        self.assertEqual(mean([1, 2, 3, 4]), 2.5)

    def test_median_odd(self):
        self.assertEqual(median([5, 1, 3]), 3)

    def test_median_even(self):
        self.assertEqual(median([4, 1, 3, 2]), 2.5)

    def test_mode(self):
        self.assertEqual(mode([1, 2, 2, 3]), 2)

    def test_mode_tie_takes_the_first_seen(self):
        self.assertEqual(mode(["b", "a", "a", "b"]), "b")

    def test_empty_data_is_an_error(self):
        with self.assertRaises(ValueError):
            mean([])


class TestSpread(unittest.TestCase):
    def test_sample_variance(self):
        self.assertAlmostEqual(variance([2, 4, 4, 4, 5, 5, 7, 9]), 32 / 7)

    def test_stdev(self):
        self.assertAlmostEqual(stdev([1, 3]), math.sqrt(2))

    def test_variance_needs_two_points(self):
        with self.assertRaises(ValueError):
            variance([1])


class TestPercentile(unittest.TestCase):
    def test_extremes(self):
        data = [3, 1, 2]
        self.assertEqual(percentile(data, 0), 1)
        self.assertEqual(percentile(data, 100), 3)

    def test_interpolates_between_ranks(self):
        self.assertAlmostEqual(percentile([10, 20, 30, 40], 50), 25)

    def test_quartile(self):
        self.assertAlmostEqual(percentile([1, 2, 3, 4, 5], 25), 2)

    def test_q_out_of_range(self):
        with self.assertRaises(ValueError):
            percentile([1, 2], 101)
