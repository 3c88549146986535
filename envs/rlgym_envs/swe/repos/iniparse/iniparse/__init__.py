"""A tiny INI parser with typed getters."""

from iniparse.config import Config, MissingKeyError
from iniparse.parser import ParseError, parse

__all__ = ["Config", "MissingKeyError", "ParseError", "parse"]
