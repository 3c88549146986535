"""Small text utilities: slugs, word wrapping, truncation, case conversion and word counts."""

from textkit.case import camel_to_snake, snake_to_camel
from textkit.text import slugify, truncate, word_count, wrap

__all__ = ["camel_to_snake", "slugify", "snake_to_camel", "truncate", "word_count", "wrap"]
