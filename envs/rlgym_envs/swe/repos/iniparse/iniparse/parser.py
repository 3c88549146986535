"""`parse(text)`: INI text to a `Config`."""

from iniparse.config import Config


class ParseError(ValueError):
    """The text is not valid INI; `lineno` is the 1-based line of the problem."""

    def __init__(self, lineno, message):
        super().__init__(f"line {lineno}: {message}")
        self.lineno = lineno


def _parse_value(raw, lineno):
    """A value without its inline comment and, when quoted, without its quotes."""
    raw = raw.strip()
    if raw[:1] in ("'", '"'):
        end = raw.find(raw[0], 1)
        if end == -1:
            raise ParseError(lineno, "unterminated quoted value")
        return raw[1:end]
    # An inline comment starts with # or ; after whitespace, so "#ff0000" is a value.
    for marker in (" #", " ;", "\t#", "\t;"):
        cut = raw.find(marker)
        if cut != -1:
            raw = raw[:cut]
    return raw.rstrip()


def parse(text):
    """Parse INI text. Repeated sections are merged; a repeated key keeps its last value."""
    config = Config()
    section = None
    for lineno, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            if not line.endswith("]"):
                raise ParseError(lineno, "section header without a closing ]")
            section = line[1:-1].strip()
            if not section:
                raise ParseError(lineno, "empty section name")
            config._sections.setdefault(section, {})
            continue
        if section is None:
            raise ParseError(lineno, "key outside of any section")
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise ParseError(lineno, "expected key = value")
        config._sections[section][key.strip().lower()] = _parse_value(value, lineno)
    return config
