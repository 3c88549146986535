import unittest

from lrucache import memoize


class TestMemoize(unittest.TestCase):
    def test_caches_results(self):
        calls = []

        @memoize(capacity=4)
        def square(x):
            calls.append(x)
            return x * x

        self.assertEqual([square(3), square(3), square(4)], [9, 9, 16])
        self.assertEqual(calls, [3, 4])

    def test_caches_none_results(self):
        calls = []

        @memoize()
        def lookup(key):
            calls.append(key)
            return None

        lookup("a")
        lookup("a")
        self.assertEqual(calls, ["a"])

    def test_keyword_arguments_are_part_of_the_key(self):
        @memoize()
        def power(x, exponent=2):
            return x**exponent

        self.assertEqual(power(2), 4)
        self.assertEqual(power(2, exponent=3), 8)

    def test_capacity_bounds_the_cache(self):
        @memoize(capacity=2)
        def double(x):
            return 2 * x

        for i in range(5):
            double(i)
        self.assertEqual(len(double.cache), 2)

    def test_keeps_the_function_name(self):
        @memoize()
        def named():
            return 1

        self.assertEqual(named.__name__, "named")
