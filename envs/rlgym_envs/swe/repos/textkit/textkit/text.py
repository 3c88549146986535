"""Slugs, word wrapping, truncation and word counts."""

import re
import unicodedata


def slugify(text, sep="-"):
    """Turn text into a URL slug: 'Hello, World!' -> 'hello-world'. Accents are dropped."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    words = re.findall(r"[a-z0-9]+", ascii_text.lower())
    return sep.join(words)


def wrap(text, width):
    """Greedy word wrap: a list of lines of at most `width` characters.

    Words are separated by single spaces; a word longer than `width` gets a line of its own.
    """
    if width < 1:
        raise ValueError("width must be at least 1")
    lines = []
    current = ""
    for word in text.split():
        if not current:
            current = word
        elif len(current) + 1 + len(word) <= width:
            current += " " + word
        else:
            lines.append(current)
            current = word
    if current:
        lines.append(current)
    return lines


def truncate(text, width, ellipsis="..."):
    """Shorten `text` to at most `width` characters, ending with `ellipsis` when it was cut."""
    if width < len(ellipsis):
        raise ValueError("width must be at least the length of the ellipsis")
    if len(text) <= width:
        return text
    return text[: width - len(ellipsis)].rstrip() + ellipsis


def word_count(text):
    """Count words case-insensitively, ignoring punctuation.

    Returns a dict ordered from the most frequent word to the least; ties in alphabetical order.
    """
    counts = {}
    for word in re.findall(r"[a-z0-9']+", text.lower()):
        word = word.strip("'")
        if word:
            counts[word] = counts.get(word, 0) + 1
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))
