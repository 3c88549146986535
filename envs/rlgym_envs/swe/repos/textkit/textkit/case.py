"""Conversions between camelCase and snake_case identifiers."""

import re


def camel_to_snake(name):
    """'parseHTTPResponse' -> 'parse_http_response'; runs of capitals stay one word."""
    spaced = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", spaced)
    return spaced.lower()


def snake_to_camel(name, upper_first=False):
    """'parse_http_response' -> 'parseHttpResponse' ('ParseHttpResponse' with `upper_first`)."""
    parts = [part for part in name.split("_") if part]
    if not parts:
        return ""
    first = parts[0].capitalize() if upper_first else parts[0].lower()
    return first + "".join(part.capitalize() for part in parts[1:])
