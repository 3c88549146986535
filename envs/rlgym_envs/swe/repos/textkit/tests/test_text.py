import unittest

from textkit import slugify, truncate, word_count, wrap


class TestSlugify(unittest.TestCase):
    def test_basic(self):
        self.assertEqual(slugify("Hello, World!"), "hello-world")

    def test_accents_are_dropped(self):
        self.assertEqual(slugify("Crème brûlée"), "creme-brulee")

    def test_custom_separator(self):
        self.assertEqual(slugify("a b  c", sep="_"), "a_b_c")

    def test_empty(self):
        self.assertEqual(slugify("!!!"), "")


class TestWrap(unittest.TestCase):
    def test_short_text_is_one_line(self):
        self.assertEqual(wrap("hello world", 20), ["hello world"])

    def test_breaks_between_words(self):
        self.assertEqual(wrap("the quick brown fox", 10), ["the quick", "brown fox"])

    def test_line_may_fill_the_width_exactly(self):
        self.assertEqual(wrap("abcd efgh ij", 9), ["abcd efgh", "ij"])

    def test_long_word_gets_its_own_line(self):
        self.assertEqual(wrap("a supercalifragilistic b", 5), ["a", "supercalifragilistic", "b"])

    def test_collapses_whitespace(self):
        self.assertEqual(wrap("  a \n b\tc  ", 80), ["a b c"])

    def test_invalid_width(self):
        with self.assertRaises(ValueError):
            wrap("text", 0)


class TestTruncate(unittest.TestCase):
    def test_short_text_unchanged(self):
        self.assertEqual(truncate("short", 10), "short")

    def test_result_fits_the_width(self):
        result = truncate("The quick brown fox jumps", 12)
        self.assertLessEqual(len(result), 12)
        self.assertTrue(result.endswith("..."))

    def test_cut_text(self):
        self.assertEqual(truncate("abcdefghij", 8), "abcde...")

    def test_custom_ellipsis(self):
        self.assertEqual(truncate("abcdefghij", 5, ellipsis="~"), "abcd~")

    def test_width_smaller_than_ellipsis(self):
        with self.assertRaises(ValueError):
            truncate("abcdef", 2)


class TestWordCount(unittest.TestCase):
    def test_counts_case_insensitively(self):
        self.assertEqual(word_count("The cat and the hat"), {"the": 2, "and": 1, "cat": 1, "hat": 1})

    def test_most_frequent_word_first(self):
        counts = word_count("b a b c b a")
        self.assertEqual(list(counts), ["b", "a", "c"])

    def test_ignores_punctuation(self):
        self.assertEqual(word_count("Hi! hi? 'hi'"), {"hi": 3})

    def test_empty(self):
        self.assertEqual(word_count(""), {})
