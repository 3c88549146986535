"""`Config`: parsed sections of key/value strings, with typed getters."""

_MISSING = object()
_TRUE = {"1", "yes", "true", "on"}
_FALSE = {"0", "no", "false", "off"}


class MissingKeyError(KeyError):
    """The section or key does not exist and no default was given."""


class Config:
    """Sections of string values. Section names are case-sensitive; keys are not."""

    def __init__(self):
        self._sections = {}

    def sections(self):
        """Section names in the order they first appeared."""
        return list(self._sections)

    def __contains__(self, section):
        return section in self._sections

    def items(self, section):
        """(key, value) pairs of a section, in file order."""
        if section not in self._sections:
            raise MissingKeyError(f"no section [{section}]")
        return list(self._sections[section].items())

    def get(self, section, key, default=_MISSING):
        """The string value of `key` in `section`, or `default` when it is missing."""
        value = self._sections.get(section, {}).get(key.lower(), _MISSING)
        if value is _MISSING:
            if default is _MISSING:
                raise MissingKeyError(f"no key {key!r} in section [{section}]")
            return default
        return value

    def getint(self, section, key, default=_MISSING):
        value = self.get(section, key, default)
        return value if value is default else int(value)

    def getfloat(self, section, key, default=_MISSING):
        value = self.get(section, key, default)
        return value if value is default else float(value)

    def getbool(self, section, key, default=_MISSING):
        """Booleans: 1/yes/true/on and 0/no/false/off, in any letter case."""
        value = self.get(section, key, default)
        if value is default:
            return value
        if value.lower() in _TRUE:
            return True
        if value.lower() in _FALSE:
            return False
        raise ValueError(f"not a boolean: {value!r}")

    def getlist(self, section, key, default=_MISSING):
        """A comma-separated value as a list of stripped, non-empty items."""
        value = self.get(section, key, default)
        if value is default:
            return value
        return [item.strip() for item in value.split(",") if item.strip()]
