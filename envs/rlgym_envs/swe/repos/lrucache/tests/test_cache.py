import unittest

from lrucache import LRUCache


class TestLRUCache(unittest.TestCase):
    def test_put_and_get(self):
        cache = LRUCache(2)
        cache.put("a", 1)
        self.assertEqual(cache.get("a"), 1)
        self.assertIsNone(cache.get("b"))
        self.assertEqual(cache.get("b", 0), 0)

    def test_evicts_the_least_recently_used(self):
        cache = LRUCache(2)
        cache.put("a", 1)
        cache.put("b", 2)
        cache.put("c", 3)
        self.assertEqual(cache.keys(), ["b", "c"])

    def test_get_refreshes_recency(self):
        cache = LRUCache(2)
        cache.put("a", 1)
        cache.put("b", 2)
        cache.get("a")
        cache.put("c", 3)
        self.assertIn("a", cache)
        self.assertNotIn("b", cache)

    def test_put_existing_key_updates_and_refreshes(self):
        cache = LRUCache(2)
        cache.put("a", 1)
        cache.put("b", 2)
        cache.put("a", 10)
        cache.put("c", 3)
        self.assertEqual(cache.keys(), ["a", "c"])
        self.assertEqual(cache.peek("a"), 10)

    def test_peek_does_not_refresh(self):
        cache = LRUCache(2)
        cache.put("a", 1)
        cache.put("b", 2)
        self.assertEqual(cache.peek("a"), 1)
        cache.put("c", 3)
        self.assertNotIn("a", cache)

    def test_statistics(self):
        cache = LRUCache(4)
        cache.put("a", 1)
        cache.get("a")
        cache.get("a")
        cache.get("x")
        self.assertEqual((cache.hits, cache.misses), (2, 1))
        self.assertAlmostEqual(cache.hit_rate, 2 / 3)

    def test_hit_rate_without_lookups(self):
        self.assertEqual(LRUCache(1).hit_rate, 0.0)

    def test_delete(self):
        cache = LRUCache(2)
        cache.put("a", 1)
        self.assertTrue(cache.delete("a"))
        self.assertFalse(cache.delete("a"))
        self.assertEqual(len(cache), 0)

    def test_resize_shrinks_to_the_new_capacity(self):
        cache = LRUCache(5)
        for i in range(5):
            cache.put(i, i)
        cache.resize(2)
        self.assertEqual(cache.keys(), [3, 4])

    def test_resize_grows(self):
        cache = LRUCache(1)
        cache.resize(3)
        for i in range(3):
            cache.put(i, i)
        self.assertEqual(len(cache), 3)

    def test_invalid_capacity(self):
        with self.assertRaises(ValueError):
            LRUCache(0)
