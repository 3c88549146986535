import unittest

from textkit import camel_to_snake, snake_to_camel


class TestCamelToSnake(unittest.TestCase):
    def test_simple(self):
        self.assertEqual(camel_to_snake("camelCase"), "camel_case")

    def test_pascal_case(self):
        self.assertEqual(camel_to_snake("PascalCaseName"), "pascal_case_name")

    def test_acronym_in_the_middle(self):
        self.assertEqual(camel_to_snake("parseHTTPResponse"), "parse_http_response")

    def test_acronym_at_the_start(self):
        self.assertEqual(camel_to_snake("XMLParser"), "xml_parser")

    def test_digits(self):
        self.assertEqual(camel_to_snake("utf8Decoder"), "utf8_decoder")

    def test_already_snake(self):
        self.assertEqual(camel_to_snake("already_snake"), "already_snake")


class TestSnakeToCamel(unittest.TestCase):
    def test_simple(self):
        self.assertEqual(snake_to_camel("parse_http_response"), "parseHttpResponse")

    def test_upper_first(self):
        self.assertEqual(snake_to_camel("parse_http_response", upper_first=True), "ParseHttpResponse")

    def test_extra_underscores(self):
        self.assertEqual(snake_to_camel("__a__b_"), "aB")

    def test_empty(self):
        self.assertEqual(snake_to_camel("___"), "")
