"""The shipped SWE instances: bugs injected into the small libraries under `repos/`, with issue texts.

Each `Bug` names its repository, the edits that *inject* it (`(path, correct text, buggy text)`, the
correct text occurring exactly once in the clean file) and the tests the bug breaks (FAIL_TO_PASS).
PASS_TO_PASS is every other test of the repository. The gold patch is the inverse of the edits.
`tests/envs/test_swe_instances.py` checks every instance with real pytest: the buggy tree
fails exactly the FAIL_TO_PASS tests and the fixed tree passes them all.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Bug:
    """One shipped instance before it is built into an `Instance` (see `instances.builtin_instances`)."""

    id: str
    repo: str
    edits: tuple[tuple[str, str, str], ...]
    fail_to_pass: tuple[str, ...]
    issue: str


_INI_CFG, _INI_PARSER = "iniparse/config.py", "iniparse/parser.py"
_IV, _IV_SETS = "intervals/interval.py", "intervals/sets.py"
_LRU, _MEMO = "lrucache/cache.py", "lrucache/memo.py"
_HEAP = "pqueue/heap.py"
_TEXT, _CASE = "textkit/text.py", "textkit/case.py"
_STATS, _SUMMARY = "statkit/stats.py", "statkit/summary.py"

BUGS: tuple[Bug, ...] = (
    Bug(
        "iniparse-1",
        "iniparse",
        ((_INI_CFG, "        if value.lower() in _TRUE:", "        if value in _TRUE:"),),
        ("tests/test_config.py::TestGetters::test_getbool_any_letter_case",),
        "getbool() rejects capitalised booleans\n\nWith `verbose = True` in a section, `config.getbool('app', "
        "'verbose')` raises `ValueError: not a boolean: 'True'`. The docs say booleans are accepted in any "
        "letter case, and `off`/`OFF` both work for false values.",
    ),
    Bug(
        "iniparse-2",
        "iniparse",
        ((_INI_PARSER, '    for marker in (" #", " ;", "\\t#", "\\t;"):', '    for marker in ("#", ";"):'),),
        ("tests/test_parser.py::TestParse::test_hash_inside_a_value_is_kept",),
        "Colour values like #ff0000 are parsed as empty strings\n\n```ini\n[paths]\ncolor = #ff0000\n```\n"
        "`parse(text).get('paths', 'color')` returns `''`. Only a `#` or `;` after whitespace should start "
        "an inline comment.",
    ),
    Bug(
        "iniparse-3",
        "iniparse",
        (
            (
                _INI_PARSER,
                "            config._sections.setdefault(section, {})",
                "            config._sections[section] = {}",
            ),
        ),
        ("tests/test_parser.py::TestParse::test_repeated_section_is_merged",),
        "A repeated section header drops the keys read before it\n\nFor `[a] x=1`, `[b] y=2`, then `[a] z=3` "
        "again, `config.items('a')` is `[('z', '3')]`; `x` is lost. Repeated sections should be merged.",
    ),
    Bug(
        "iniparse-4",
        "iniparse",
        ((_INI_CFG, 'for item in value.split(",") if item.strip()]', 'for item in value.split(",")]'),),
        ("tests/test_config.py::TestGetters::test_getlist_skips_empty_items",),
        "getlist() returns empty strings for blank items\n\n`tags = web, api , , db,` gives "
        "`['web', 'api', '', 'db', '']` instead of `['web', 'api', 'db']`.",
    ),
    Bug(
        "iniparse-5",
        "iniparse",
        (
            (
                _INI_PARSER,
                '        key, sep, value = line.partition("=")',
                '        key, sep, value = line.rpartition("=")',
            ),
        ),
        ("tests/test_parser.py::TestParse::test_value_with_equals_sign",),
        "Values that contain '=' are split at the wrong place\n\n`expr = a=b` is read as key `expr = a` with "
        "value `b`; the key should be `expr` and the value `a=b`.",
    ),
    Bug(
        "intervals-1",
        "intervals",
        ((_IV, "        return self.start <= x < self.end", "        return self.start <= x <= self.end"),),
        (
            "tests/test_interval.py::TestInterval::test_empty_interval_contains_nothing",
            "tests/test_interval.py::TestInterval::test_end_is_excluded",
        ),
        "Interval.contains() includes the end point\n\nIntervals are half-open, but `Interval(1, 4).contains(4)` "
        "is True, and even the empty `Interval(2, 2)` contains 2.",
    ),
    Bug(
        "intervals-2",
        "intervals",
        (
            (
                _IV_SETS,
                "        if merged and current.start <= merged[-1].end:",
                "        if merged and current.start < merged[-1].end:",
            ),
        ),
        (
            "tests/test_sets.py::TestGaps::test_no_gaps_when_touching",
            "tests/test_sets.py::TestMerge::test_touching_intervals_merge",
        ),
        "merge() keeps touching intervals apart\n\n`merge([Interval(1, 2), Interval(2, 3)])` returns both "
        "intervals instead of `[Interval(1, 3)]`, and `gaps()` then reports an empty gap `Interval(2, 2)`.",
    ),
    Bug(
        "intervals-3",
        "intervals",
        ((_IV_SETS, "Interval(last.start, max(last.end, current.end))", "Interval(last.start, current.end)"),),
        (
            "tests/test_sets.py::TestMerge::test_nested_interval_is_absorbed",
            "tests/test_sets.py::TestTotalLength::test_nested",
        ),
        "merge() shrinks an interval that contains the next one\n\n`merge([Interval(0, 10), Interval(2, 3)])` "
        "gives `[Interval(0, 3)]`, so `total_length` of those two is 3 instead of 10.",
    ),
    Bug(
        "intervals-4",
        "intervals",
        ((_IV_SETS, "        if hole.start > cursor:", "        if hole.start >= cursor:"),),
        ("tests/test_sets.py::TestSubtract::test_hole_at_the_start_leaves_no_empty_piece",),
        "subtract() returns an empty piece when a hole starts at the base's start\n\n"
        "`subtract(Interval(0, 10), [Interval(0, 4)])` returns `[Interval(0, 0), Interval(4, 10)]`; the "
        "result should only hold non-empty intervals.",
    ),
    Bug(
        "lrucache-1",
        "lrucache",
        ((_LRU, "        return self._data.get(key, default)", "        return self.get(key, default)"),),
        ("tests/test_cache.py::TestLRUCache::test_peek_does_not_refresh",),
        "peek() marks the key as recently used\n\nAfter `put('a')`, `put('b')`, `peek('a')`, `put('c')` on a "
        "cache of capacity 2, `b` is evicted instead of `a`. `peek` is documented not to touch recency "
        "(nor the hit/miss statistics).",
    ),
    Bug(
        "lrucache-2",
        "lrucache",
        (
            (
                _LRU,
                "        if key in self._data:\n            self._data.move_to_end(key)\n        self._data[key] = value",
                "        self._data[key] = value",
            ),
        ),
        ("tests/test_cache.py::TestLRUCache::test_put_existing_key_updates_and_refreshes",),
        "Updating a key with put() does not make it recently used\n\nWith capacity 2: `put('a', 1)`, "
        "`put('b', 2)`, `put('a', 10)`, `put('c', 3)` evicts `a`, the key just written. `put` should refresh "
        "the key like `get` does.",
    ),
    Bug(
        "lrucache-3",
        "lrucache",
        (
            (_MEMO, "            result = cache.get(key, _MISSING)", "            result = cache.get(key)"),
            (_MEMO, "            if result is _MISSING:", "            if result is None:"),
        ),
        ("tests/test_memo.py::TestMemoize::test_caches_none_results",),
        "memoize calls the function again when it returned None\n\nA memoized function that returns `None` "
        "is re-run on every call with the same arguments; `None` results should be cached like any other.",
    ),
    Bug(
        "lrucache-4",
        "lrucache",
        (
            (
                _LRU,
                "        while len(self._data) > capacity:\n            self._data.popitem(last=False)",
                "        while len(self._data) > capacity:\n            self._data.popitem()",
            ),
        ),
        ("tests/test_cache.py::TestLRUCache::test_resize_shrinks_to_the_new_capacity",),
        "resize() evicts the most recently used keys\n\nFilling a cache with keys 0..4 and calling "
        "`resize(2)` leaves `[0, 1]`; it should keep the two most recently used keys, `[3, 4]`.",
    ),
    Bug(
        "lrucache-5",
        "lrucache",
        ((_MEMO, "            key = (args, tuple(sorted(kwargs.items())))", "            key = args"),),
        ("tests/test_memo.py::TestMemoize::test_keyword_arguments_are_part_of_the_key",),
        "memoize ignores keyword arguments\n\n`power(2)` followed by `power(2, exponent=3)` returns 4 twice: "
        "calls that differ only in keyword arguments share one cache entry.",
    ),
    Bug(
        "pqueue-1",
        "pqueue",
        (
            (
                _HEAP,
                "        self._heap.append((priority, self._seq, item))",
                "        self._heap.append((priority, -self._seq, item))",
            ),
        ),
        (
            "tests/test_heap.py::TestPriorityQueue::test_equal_priorities_are_fifo",
            "tests/test_sorting.py::TestHeapsort::test_is_stable",
        ),
        "Items with equal priority come out last-in first-out\n\nPushing `first`, `second`, `third` with "
        "priority 1 pops them as `third`, `second`, `first`. Ties should be FIFO (and `heapsort` is "
        "documented as stable, which it is not right now).",
    ),
    Bug(
        "pqueue-2",
        "pqueue",
        (
            (
                _HEAP,
                "            self._sift_down(index)\n            self._sift_up(index)",
                "            self._sift_down(index)",
            ),
        ),
        ("tests/test_heap.py::TestPriorityQueue::test_remove_keeps_the_heap_order",),
        "Items come out in the wrong order after remove()\n\nPush 16, 18, 12, 14, 1, 11, 8 (priority = "
        "value), `remove(18)`, then pop everything: the order is not ascending.",
    ),
    Bug(
        "pqueue-3",
        "pqueue",
        (
            (
                _HEAP,
                "            if right < size and heap[right] < heap[smallest]:",
                "            if right < size and heap[right] < heap[left]:",
            ),
        ),
        ("tests/test_heap.py::TestPriorityQueue::test_pops_mixed_input_in_order",),
        "pop() sometimes returns items out of priority order\n\nPushing 19, 7, 2, 1, 18, 15, 13 (priority = "
        "value) and popping everything gives 1, 2, 7, 15, 13, 18, 19 instead of 1, 2, 7, 13, 15, 18, 19.",
    ),
    Bug(
        "textkit-1",
        "textkit",
        (
            (
                _TEXT,
                "        elif len(current) + 1 + len(word) <= width:",
                "        elif len(current) + 1 + len(word) < width:",
            ),
        ),
        ("tests/test_text.py::TestWrap::test_line_may_fill_the_width_exactly",),
        "wrap() never fills a line to the full width\n\n`wrap('abcd efgh ij', 9)` gives "
        "`['abcd', 'efgh ij']`; `'abcd efgh'` is exactly 9 characters and fits.",
    ),
    Bug(
        "textkit-2",
        "textkit",
        (
            (
                _TEXT,
                "    return text[: width - len(ellipsis)].rstrip() + ellipsis",
                "    return text[:width].rstrip() + ellipsis",
            ),
        ),
        (
            "tests/test_text.py::TestTruncate::test_custom_ellipsis",
            "tests/test_text.py::TestTruncate::test_cut_text",
            "tests/test_text.py::TestTruncate::test_result_fits_the_width",
        ),
        "truncate() returns text longer than the width\n\n`truncate('abcdefghij', 8)` returns "
        "`'abcdefgh...'` (11 characters). The ellipsis must fit inside the width: `'abcde...'`.",
    ),
    Bug(
        "textkit-3",
        "textkit",
        (
            (
                _CASE,
                '    spaced = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\\1_\\2", name)\n    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\\1_\\2", spaced)',
                '    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\\1_\\2", name)',
            ),
        ),
        (
            "tests/test_case.py::TestCamelToSnake::test_acronym_at_the_start",
            "tests/test_case.py::TestCamelToSnake::test_acronym_in_the_middle",
        ),
        "camel_to_snake() glues acronyms to the next word\n\n`camel_to_snake('parseHTTPResponse')` gives "
        "`'parse_httpresponse'` and `camel_to_snake('XMLParser')` gives `'xmlparser'`; expected "
        "`'parse_http_response'` and `'xml_parser'`.",
    ),
    Bug(
        "textkit-4",
        "textkit",
        ((_TEXT, 'unicodedata.normalize("NFKD", text)', 'unicodedata.normalize("NFC", text)'),),
        ("tests/test_text.py::TestSlugify::test_accents_are_dropped",),
        "slugify() deletes accented letters instead of dropping the accent\n\n`slugify('Crème brûlée')` "
        "returns `'crme-brle'`; it should be `'creme-brulee'`.",
    ),
    Bug(
        "statkit-1",
        "statkit",
        ((_STATS, "    return (ordered[middle - 1] + ordered[middle]) / 2", "    return ordered[middle]"),),
        ("tests/test_stats.py::TestCentre::test_median_even",),
        "median() of an even number of points is wrong\n\n`median([4, 1, 3, 2])` returns 3; the median "
        "of an even-sized sample is the mean of the two middle values, 2.5.",
    ),
    Bug(
        "statkit-2",
        "statkit",
        (
            (
                _STATS,
                "    return sum((x - centre) ** 2 for x in data) / (len(data) - 1)",
                "    return sum((x - centre) ** 2 for x in data) / len(data)",
            ),
        ),
        (
            "tests/test_stats.py::TestSpread::test_sample_variance",
            "tests/test_stats.py::TestSpread::test_stdev",
            "tests/test_summary.py::TestZscores::test_symmetric",
        ),
        "variance() returns the population variance\n\n`variance([2, 4, 4, 4, 5, 5, 7, 9])` is 4.0, but "
        "the function is documented as the sample variance (n - 1 in the denominator): 32/7. "
        "`stdev` and `zscores` are off as well.",
    ),
    Bug(
        "statkit-3",
        "statkit",
        (
            (
                _SUMMARY,
                "        index = min(int((x - low) / width), bins - 1)",
                "        index = int((x - low) / width)",
            ),
        ),
        (
            "tests/test_summary.py::TestHistogram::test_counts",
            "tests/test_summary.py::TestHistogram::test_maximum_goes_in_the_last_bin",
            "tests/test_summary.py::TestHistogram::test_points_outside_the_range_are_ignored",
        ),
        "histogram() crashes on the maximum value\n\n`histogram([0, 5, 10], 2)` raises `IndexError: list "
        "index out of range`. The last bin should include the upper bound.",
    ),
)
