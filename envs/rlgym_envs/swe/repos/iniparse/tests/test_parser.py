import unittest

from iniparse import ParseError, parse

SAMPLE = """
# a comment
; another comment
[server]
host = example.org
port = 8080
Debug = yes

[paths]
root = /srv/app   # inline comment
quoted = "  spaced value  "
color = #ff0000
"""


class TestParse(unittest.TestCase):
    def test_sections_in_order(self):
        self.assertEqual(parse(SAMPLE).sections(), ["server", "paths"])

    def test_values(self):
        config = parse(SAMPLE)
        self.assertEqual(config.get("server", "host"), "example.org")
        self.assertEqual(config.get("server", "port"), "8080")

    def test_keys_are_case_insensitive(self):
        config = parse(SAMPLE)
        self.assertEqual(config.get("server", "debug"), "yes")
        self.assertEqual(config.get("server", "DEBUG"), "yes")

    def test_inline_comment_is_removed(self):
        self.assertEqual(parse(SAMPLE).get("paths", "root"), "/srv/app")

    def test_hash_inside_a_value_is_kept(self):
        self.assertEqual(parse(SAMPLE).get("paths", "color"), "#ff0000")

    def test_quotes_keep_spaces(self):
        self.assertEqual(parse(SAMPLE).get("paths", "quoted"), "  spaced value  ")

    def test_repeated_section_is_merged(self):
        config = parse("[a]\nx = 1\n[b]\ny = 2\n[a]\nz = 3\n")
        self.assertEqual(config.items("a"), [("x", "1"), ("z", "3")])

    def test_repeated_key_keeps_the_last_value(self):
        self.assertEqual(parse("[a]\nx = 1\nx = 2\n").get("a", "x"), "2")

    def test_empty_value(self):
        self.assertEqual(parse("[a]\nx =\n").get("a", "x"), "")

    def test_value_with_equals_sign(self):
        self.assertEqual(parse("[a]\nexpr = a=b\n").get("a", "expr"), "a=b")


class TestParseErrors(unittest.TestCase):
    def test_key_outside_section(self):
        with self.assertRaises(ParseError) as ctx:
            parse("x = 1\n")
        self.assertEqual(ctx.exception.lineno, 1)

    def test_unclosed_header(self):
        with self.assertRaises(ParseError) as ctx:
            parse("[a]\nx = 1\n[b\n")
        self.assertEqual(ctx.exception.lineno, 3)

    def test_line_without_equals(self):
        with self.assertRaises(ParseError):
            parse("[a]\njust words\n")

    def test_unterminated_quote(self):
        with self.assertRaises(ParseError):
            parse('[a]\nx = "open\n')
