import unittest

from iniparse import MissingKeyError, parse

TEXT = """
[app]
workers = 4
ratio = 0.75
verbose = True
quiet = off
fancy = maybe
tags = web, api , , db,
"""


class TestGetters(unittest.TestCase):
    def setUp(self):
        self.config = parse(TEXT)

    def test_getint(self):
        self.assertEqual(self.config.getint("app", "workers"), 4)

    def test_getfloat(self):
        self.assertEqual(self.config.getfloat("app", "ratio"), 0.75)

    def test_getbool_any_letter_case(self):
        self.assertIs(self.config.getbool("app", "verbose"), True)

    def test_getbool_false(self):
        self.assertIs(self.config.getbool("app", "quiet"), False)

    def test_getbool_rejects_other_words(self):
        with self.assertRaises(ValueError):
            self.config.getbool("app", "fancy")

    def test_getlist_skips_empty_items(self):
        self.assertEqual(self.config.getlist("app", "tags"), ["web", "api", "db"])

    def test_default_for_missing_key(self):
        self.assertEqual(self.config.getint("app", "missing", 7), 7)
        self.assertIsNone(self.config.get("nope", "x", None))

    def test_missing_key_raises(self):
        with self.assertRaises(MissingKeyError):
            self.config.get("app", "missing")

    def test_contains(self):
        self.assertIn("app", self.config)
        self.assertNotIn("other", self.config)
