"""Writes `tasks.jsonl`, the task set shipped with `rlgym/Code-v0` (run: `python build_tasks.py`).

Each task is written here as a statement, a reference solution and the *inputs* of its visible
examples and hidden tests; the expected outputs are computed by running the reference solution, so
they cannot disagree with it. Extra hidden inputs come from a fixed-seed RNG. The tests in
`tests/envs/test_code_tasks.py` check that the oracle passes every test of every task.
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import sys
from pathlib import Path

OUT = Path(__file__).with_name("tasks.jsonl")
rng = random.Random(20261122)


def ints(n: int, lo: int, hi: int) -> list[int]:
    return [rng.randint(lo, hi) for _ in range(n)]


def words(n: int, alphabet: str = "abcde", lo: int = 1, hi: int = 6) -> list[str]:
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(lo, hi))) for _ in range(n)]


# --- function tasks: (id, difficulty, signature, statement, solution, example args, hidden args, compare)

FUNCTIONS: list[dict] = []


def function(id, difficulty, signature, prompt, solution, examples, tests, compare="exact", title=None):
    FUNCTIONS.append(
        dict(
            id=id,
            difficulty=difficulty,
            signature=signature,
            prompt=prompt,
            solution=solution,
            examples=examples,
            tests=tests,
            compare=compare,
            title=title,
        )
    )


function(
    "digit-sum",
    1,
    "def digit_sum(n: int) -> int",
    "Return the sum of the decimal digits of the non-negative integer n.",
    "def digit_sum(n):\n    return sum(int(c) for c in str(n))\n",
    [[123], [0]],
    [[9], [10], [9999], [1000001], [987654321], [55555]],
)
function(
    "reverse-words",
    1,
    "def reverse_words(s: str) -> str",
    "Return the words of s in reverse order, separated by single spaces. Words are separated by one or more spaces; ignore leading and trailing spaces.",
    "def reverse_words(s):\n    return ' '.join(reversed(s.split()))\n",
    [["hello world"], ["  a  b c "]],
    [[""], ["one"], ["the quick brown fox"], ["   spaced   out   "], ["x y"], ["a b c d e f"]],
)
function(
    "count-vowels",
    1,
    "def count_vowels(s: str) -> int",
    "Return how many characters of s are vowels (a, e, i, o, u, in either case).",
    "def count_vowels(s):\n    return sum(c in 'aeiouAEIOU' for c in s)\n",
    [["Hello"], ["xyz"]],
    [[""], ["AEIOU"], ["rhythm"], ["Programming Is Fun"], ["aaaaaaaaaa"], ["Queueing"]],
)
function(
    "is-palindrome",
    1,
    "def is_palindrome(s: str) -> bool",
    "Return True if s reads the same forwards and backwards when only its letters and digits are kept and case is ignored.",
    "def is_palindrome(s):\n    t = [c.lower() for c in s if c.isalnum()]\n    return t == t[::-1]\n",
    [["A man, a plan, a canal: Panama"], ["hello"]],
    [[""], ["a"], ["ab"], ["No 'x' in Nixon"], ["12321"], ["123 21"], ["race a car"]],
)
function(
    "fizzbuzz",
    1,
    "def fizzbuzz(n: int) -> list[str]",
    "Return the list of strings for 1..n: 'Fizz' for multiples of 3, 'Buzz' for multiples of 5, 'FizzBuzz' for multiples of both, otherwise the number as a string.",
    "def fizzbuzz(n):\n    out = []\n    for i in range(1, n + 1):\n        s = ('Fizz' if i % 3 == 0 else '') + ('Buzz' if i % 5 == 0 else '')\n        out.append(s or str(i))\n    return out\n",
    [[5], [1]],
    [[0], [3], [15], [16], [30]],
)
function(
    "max-of-list",
    1,
    "def max_value(xs: list[int]) -> int | None",
    "Return the largest number in xs, or None when xs is empty. Do not use the built-in max.",
    "def max_value(xs):\n    best = None\n    for x in xs:\n        if best is None or x > best:\n            best = x\n    return best\n",
    [[[3, 1, 4]], [[]]],
    [[[-5]], [[-3, -1, -2]], [[7, 7, 7]], [ints(20, -100, 100)], [ints(50, -1000, 1000)]],
)
function(
    "celsius-to-fahrenheit",
    1,
    "def to_fahrenheit(c: float) -> float",
    "Convert a temperature from degrees Celsius to degrees Fahrenheit (F = C * 9 / 5 + 32).",
    "def to_fahrenheit(c):\n    return c * 9 / 5 + 32\n",
    [[0], [100]],
    [[-40], [37], [36.6], [-273.15], [21.5]],
    compare="float",
)
function(
    "count-words",
    1,
    "def word_counts(text: str) -> dict[str, int]",
    "Return a dict mapping each word of text (split on whitespace, lower-cased) to how many times it occurs.",
    "def word_counts(text):\n    counts = {}\n    for w in text.lower().split():\n        counts[w] = counts.get(w, 0) + 1\n    return counts\n",
    [["the cat and The hat"], [""]],
    [["a a a"], ["One two Three two one"], ["x"], ["  many   spaces here  "], ["Go go GO gO"]],
)
function(
    "second-largest",
    1,
    "def second_largest(xs: list[int]) -> int | None",
    "Return the second largest distinct value in xs, or None if xs has fewer than two distinct values.",
    "def second_largest(xs):\n    s = sorted(set(xs))\n    return s[-2] if len(s) >= 2 else None\n",
    [[[4, 1, 3]], [[5, 5]]],
    [[[]], [[1]], [[1, 2]], [[9, 9, 8, 8]], [[-1, -2, -3]], [ints(30, 0, 10)]],
)
function(
    "running-sum",
    1,
    "def running_sum(xs: list[int]) -> list[int]",
    "Return the list of prefix sums of xs: element i is xs[0] + ... + xs[i].",
    "def running_sum(xs):\n    out, total = [], 0\n    for x in xs:\n        total += x\n        out.append(total)\n    return out\n",
    [[[1, 2, 3]], [[]]],
    [[[5]], [[-1, 1, -1, 1]], [ints(15, -50, 50)], [[0, 0, 0]]],
)
function(
    "gcd",
    1,
    "def gcd(a: int, b: int) -> int",
    "Return the greatest common divisor of the non-negative integers a and b (gcd(0, 0) is 0). Do not use math.gcd.",
    "def gcd(a, b):\n    while b:\n        a, b = b, a % b\n    return a\n",
    [[12, 18], [7, 0]],
    [[0, 0], [0, 5], [17, 13], [100, 75], [2**20, 2**12], [123456, 7890]],
)
function(
    "anagrams",
    2,
    "def are_anagrams(a: str, b: str) -> bool",
    "Return True if a and b are anagrams of each other, ignoring spaces and case.",
    "def are_anagrams(a, b):\n    norm = lambda s: sorted(s.replace(' ', '').lower())\n    return norm(a) == norm(b)\n",
    [["Listen", "Silent"], ["abc", "abd"]],
    [
        ["", ""],
        ["Dormitory", "Dirty room"],
        ["aab", "abb"],
        ["a", "A"],
        ["conversation", "voices rant on"],
        ["abc", "abcc"],
    ],
)
function(
    "roman-to-int",
    2,
    "def roman_to_int(s: str) -> int",
    "Convert a Roman numeral (I, V, X, L, C, D, M; subtractive forms such as IV and CM) to an integer.",
    "def roman_to_int(s):\n    v = {'I': 1, 'V': 5, 'X': 10, 'L': 50, 'C': 100, 'D': 500, 'M': 1000}\n    total = 0\n    for i, c in enumerate(s):\n        if i + 1 < len(s) and v[c] < v[s[i + 1]]:\n            total -= v[c]\n        else:\n            total += v[c]\n    return total\n",
    [["III"], ["MCMXCIV"]],
    [["I"], ["IV"], ["IX"], ["LVIII"], ["MMXXVI"], ["CDXLIV"], ["MMMCMXCIX"]],
)
function(
    "int-to-roman",
    2,
    "def int_to_roman(n: int) -> str",
    "Convert an integer 1 <= n <= 3999 to a Roman numeral using subtractive forms (IV, IX, XL, XC, CD, CM).",
    "def int_to_roman(n):\n    table = [(1000, 'M'), (900, 'CM'), (500, 'D'), (400, 'CD'), (100, 'C'), (90, 'XC'), (50, 'L'), (40, 'XL'), (10, 'X'), (9, 'IX'), (5, 'V'), (4, 'IV'), (1, 'I')]\n    out = ''\n    for value, sym in table:\n        while n >= value:\n            out += sym\n            n -= value\n    return out\n",
    [[4], [1994]],
    [[1], [9], [14], [40], [3999], [2026], [444]],
)
function(
    "balanced-brackets",
    2,
    "def balanced(s: str) -> bool",
    "Return True if the brackets (), [] and {} in s are balanced and properly nested. Other characters are ignored.",
    "def balanced(s):\n    pairs = {')': '(', ']': '[', '}': '{'}\n    stack = []\n    for c in s:\n        if c in '([{':\n            stack.append(c)\n        elif c in pairs:\n            if not stack or stack.pop() != pairs[c]:\n                return False\n    return not stack\n",
    [["([]{})"], ["(]"]],
    [[""], ["("], [")("], ["a(b[c]d)e"], ["{[()()]}"], ["([)]"], ["((("], ["x"]],
)
function(
    "run-length-encode",
    2,
    "def rle(s: str) -> str",
    "Run-length encode s: each maximal run of a character c of length k becomes k followed by c, e.g. 'aaab' -> '3a1b'.",
    "def rle(s):\n    out, i = [], 0\n    while i < len(s):\n        j = i\n        while j < len(s) and s[j] == s[i]:\n            j += 1\n        out.append(f'{j - i}{s[i]}')\n        i = j\n    return ''.join(out)\n",
    [["aaab"], ["abc"]],
    [[""], ["a"], ["zzzzzzzzzzzz"], ["aabbaa"], words(1, "ab", 10, 20)[0:1], ["  x"]],
)
function(
    "two-sum",
    2,
    "def two_sum(nums: list[int], target: int) -> list[int]",
    "Return the indices [i, j] with i < j of the first pair (smallest j, then smallest i) with nums[i] + nums[j] == target, or [] if there is none.",
    "def two_sum(nums, target):\n    seen = {}\n    for j, x in enumerate(nums):\n        if target - x in seen:\n            return [seen[target - x], j]\n        seen.setdefault(x, j)\n    return []\n",
    [[[2, 7, 11, 15], 9], [[1, 2], 5]],
    [[[], 0], [[3, 3], 6], [[1, 5, 1, 5], 6], [[0, -1, 1], 0], [ints(30, -20, 20), 7], [[4, 4, 4], 8]],
)
function(
    "flatten",
    2,
    "def flatten(xs: list) -> list",
    "Flatten an arbitrarily nested list of integers into a flat list, keeping the order.",
    "def flatten(xs):\n    out = []\n    for x in xs:\n        if isinstance(x, list):\n            out.extend(flatten(x))\n        else:\n            out.append(x)\n    return out\n",
    [[[1, [2, [3, 4]], 5]], [[]]],
    [[[[[]]]], [[[1], [2], [3]]], [[[[[[7]]]], 8]], [[1, 2, 3]], [[[], [1, []], [[2]]]]],
)
function(
    "merge-intervals",
    2,
    "def merge_intervals(intervals: list[list[int]]) -> list[list[int]]",
    "Merge overlapping closed intervals [start, end] (touching ones, like [1, 2] and [2, 3], overlap) and return them sorted by start.",
    "def merge_intervals(intervals):\n    out = []\n    for s, e in sorted(intervals):\n        if out and s <= out[-1][1]:\n            out[-1][1] = max(out[-1][1], e)\n        else:\n            out.append([s, e])\n    return out\n",
    [[[[1, 3], [2, 6], [8, 10]]], [[[1, 4], [4, 5]]]],
    [
        [[]],
        [[[5, 7]]],
        [[[6, 8], [1, 2], [2, 3]]],
        [[[1, 10], [2, 3], [4, 5]]],
        [[[0, 0], [1, 1]]],
        [[[3, 4], [1, 2], [5, 6]]],
    ],
)
function(
    "caesar-cipher",
    2,
    "def caesar(text: str, shift: int) -> str",
    "Shift each letter of text by shift positions in the alphabet, wrapping around and keeping case; other characters are unchanged. shift may be negative or larger than 26.",
    "def caesar(text, shift):\n    out = []\n    for c in text:\n        if c.isascii() and c.isalpha():\n            base = ord('A') if c.isupper() else ord('a')\n            out.append(chr(base + (ord(c) - base + shift) % 26))\n        else:\n            out.append(c)\n    return ''.join(out)\n",
    [["abc", 1], ["Hello, World!", 13]],
    [["", 5], ["xyz", 3], ["ABC", -1], ["Zebra", 52], ["mixed Case 123", 27], ["a", -27]],
)
function(
    "primes-up-to",
    2,
    "def primes_up_to(n: int) -> list[int]",
    "Return all primes p with 2 <= p <= n, in increasing order.",
    "def primes_up_to(n):\n    if n < 2:\n        return []\n    sieve = [True] * (n + 1)\n    sieve[0] = sieve[1] = False\n    for i in range(2, int(n ** 0.5) + 1):\n        if sieve[i]:\n            sieve[i * i :: i] = [False] * len(sieve[i * i :: i])\n    return [i for i, p in enumerate(sieve) if p]\n",
    [[10], [1]],
    [[0], [2], [3], [30], [97], [100], [500]],
)
function(
    "matrix-transpose",
    2,
    "def transpose(m: list[list[int]]) -> list[list[int]]",
    "Return the transpose of the rectangular matrix m (a list of rows). The transpose of [] is [].",
    "def transpose(m):\n    return [list(row) for row in zip(*m)]\n",
    [[[[1, 2, 3], [4, 5, 6]]], [[]]],
    [[[[1]]], [[[1, 2]]], [[[1], [2], [3]]], [[[1, 2], [3, 4], [5, 6]]]],
)
function(
    "group-anagrams",
    2,
    "def group_anagrams(words: list[str]) -> list[list[str]]",
    "Group the words that are anagrams of each other. Each group keeps the words' input order; groups are ordered by the position of their first word.",
    "def group_anagrams(words):\n    groups = {}\n    for w in words:\n        groups.setdefault(''.join(sorted(w)), []).append(w)\n    return list(groups.values())\n",
    [[["eat", "tea", "tan", "ate", "nat", "bat"]], [[]]],
    [[["a"]], [["ab", "ba", "ab"]], [words(20, "abc", 1, 3)], [["", ""]], [["abc", "def"]]],
)
function(
    "binary-search",
    2,
    "def search(xs: list[int], target: int) -> int",
    "xs is sorted in increasing order with distinct values. Return the index of target in xs, or -1 if it is absent.",
    "def search(xs, target):\n    lo, hi = 0, len(xs) - 1\n    while lo <= hi:\n        mid = (lo + hi) // 2\n        if xs[mid] == target:\n            return mid\n        if xs[mid] < target:\n            lo = mid + 1\n        else:\n            hi = mid - 1\n    return -1\n",
    [[[1, 3, 5, 7], 5], [[1, 3, 5, 7], 4]],
    [
        [[], 1],
        [[2], 2],
        [[2], 3],
        [list(range(0, 1000, 3)), 999],
        [list(range(0, 1000, 3)), 300],
        [list(range(-50, 50)), -50],
    ],
)
function(
    "longest-common-prefix",
    2,
    "def common_prefix(words: list[str]) -> str",
    "Return the longest string that is a prefix of every word in words ('' for an empty list).",
    "def common_prefix(words):\n    if not words:\n        return ''\n    p = words[0]\n    for w in words[1:]:\n        while not w.startswith(p):\n            p = p[:-1]\n    return p\n",
    [[["flower", "flow", "flight"]], [["dog", "racecar"]]],
    [[[]], [["alone"]], [["same", "same"]], [["ab", "a"]], [["", "x"]], [["interview", "internet", "interval"]]],
)
function(
    "stats-mean-median",
    2,
    "def mean_median(xs: list[float]) -> list[float]",
    "Return [mean, median] of the non-empty list xs. The median of an even-length list is the mean of its two middle values.",
    "def mean_median(xs):\n    s = sorted(xs)\n    n = len(s)\n    median = s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2\n    return [sum(s) / n, median]\n",
    [[[1, 2, 3, 4]], [[5]]],
    [[[3, 1, 2]], [[1.5, 2.5]], [[-1, -1, 10]], [ints(21, -100, 100)], [[0.1, 0.2, 0.3, 0.4, 100]]],
    compare="float",
)
function(
    "longest-increasing-subsequence",
    3,
    "def lis_length(xs: list[int]) -> int",
    "Return the length of the longest strictly increasing subsequence of xs. Lists may have up to 10,000 elements.",
    "from bisect import bisect_left\n\ndef lis_length(xs):\n    tails = []\n    for x in xs:\n        i = bisect_left(tails, x)\n        if i == len(tails):\n            tails.append(x)\n        else:\n            tails[i] = x\n    return len(tails)\n",
    [[[10, 9, 2, 5, 3, 7, 101, 18]], [[]]],
    [[[1]], [[5, 4, 3, 2, 1]], [[1, 2, 2, 3]], [ints(200, 0, 1000)], [ints(10000, 0, 10**6)], [list(range(5000))]],
)
function(
    "edit-distance",
    3,
    "def edit_distance(a: str, b: str) -> int",
    "Return the Levenshtein distance between a and b: the fewest single-character insertions, deletions and substitutions that turn a into b.",
    "def edit_distance(a, b):\n    prev = list(range(len(b) + 1))\n    for i, ca in enumerate(a, 1):\n        cur = [i]\n        for j, cb in enumerate(b, 1):\n            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))\n        prev = cur\n    return prev[-1]\n",
    [["kitten", "sitting"], ["", "abc"]],
    [
        ["", ""],
        ["abc", "abc"],
        ["flaw", "lawn"],
        ["intention", "execution"],
        [words(1, "ab", 30, 40)[0], words(1, "ab", 30, 40)[0]],
        ["a", "b"],
    ],
)
function(
    "coin-change",
    3,
    "def min_coins(coins: list[int], amount: int) -> int",
    "Return the fewest coins (each denomination may be used any number of times) that sum to amount, or -1 if that is impossible. min_coins(coins, 0) is 0.",
    "def min_coins(coins, amount):\n    inf = amount + 1\n    best = [0] + [inf] * amount\n    for a in range(1, amount + 1):\n        for c in coins:\n            if c <= a and best[a - c] + 1 < best[a]:\n                best[a] = best[a - c] + 1\n    return best[amount] if best[amount] < inf else -1\n",
    [[[1, 2, 5], 11], [[2], 3]],
    [[[1], 0], [[7], 14], [[2, 5, 10, 1], 27], [[186, 419, 83, 408], 6249], [[3, 7], 11], [[5, 10], 1]],
)
function(
    "word-break",
    3,
    "def word_break(s: str, words: list[str]) -> bool",
    "Return True if s can be split into a sequence of one or more words from words (words may be reused).",
    "def word_break(s, words):\n    ok = [True] + [False] * len(s)\n    vocab = set(words)\n    for i in range(1, len(s) + 1):\n        ok[i] = any(ok[j] and s[j:i] in vocab for j in range(i))\n    return ok[len(s)]\n",
    [["leetcode", ["leet", "code"]], ["catsandog", ["cats", "dog", "sand", "and", "cat"]]],
    [
        ["", ["a"]],
        ["applepenapple", ["apple", "pen"]],
        ["aaaaaaaab", ["a", "aa", "aaa"]],
        ["abab", ["ab"]],
        ["abc", []],
    ],
)
function(
    "topological-order",
    3,
    "def course_order(n: int, prereqs: list[list[int]]) -> list[int]",
    "Courses are 0..n-1; [a, b] in prereqs means b must be taken before a. Return an order in which all courses can be taken, choosing the smallest-numbered available course at each step, or [] if there is a cycle.",
    "import heapq\n\ndef course_order(n, prereqs):\n    indeg = [0] * n\n    after = [[] for _ in range(n)]\n    for a, b in prereqs:\n        after[b].append(a)\n        indeg[a] += 1\n    ready = [i for i in range(n) if indeg[i] == 0]\n    heapq.heapify(ready)\n    order = []\n    while ready:\n        c = heapq.heappop(ready)\n        order.append(c)\n        for d in after[c]:\n            indeg[d] -= 1\n            if indeg[d] == 0:\n                heapq.heappush(ready, d)\n    return order if len(order) == n else []\n",
    [[2, [[1, 0]]], [2, [[1, 0], [0, 1]]]],
    [
        [1, []],
        [3, []],
        [4, [[1, 0], [2, 0], [3, 1], [3, 2]]],
        [5, [[0, 4], [1, 4], [2, 3]]],
        [3, [[0, 1], [1, 2], [2, 0]]],
    ],
)
function(
    "shortest-path-grid",
    3,
    "def shortest_path(grid: list[str]) -> int",
    "grid is a list of equal-length strings of '.' (free) and '#' (wall). Return the fewest steps (up, down, left, right) from the top-left to the bottom-right cell, or -1 if it is unreachable or either cell is a wall.",
    "from collections import deque\n\ndef shortest_path(grid):\n    h, w = len(grid), len(grid[0])\n    if grid[0][0] == '#' or grid[h - 1][w - 1] == '#':\n        return -1\n    dist = {(0, 0): 0}\n    q = deque([(0, 0)])\n    while q:\n        r, c = q.popleft()\n        if (r, c) == (h - 1, w - 1):\n            return dist[r, c]\n        for dr, dc in ((1, 0), (-1, 0), (0, 1), (0, -1)):\n            nr, nc = r + dr, c + dc\n            if 0 <= nr < h and 0 <= nc < w and grid[nr][nc] == '.' and (nr, nc) not in dist:\n                dist[nr, nc] = dist[r, c] + 1\n                q.append((nr, nc))\n    return -1\n",
    [[["..", ".."]], [[".#", "#."]]],
    [
        [["."]],
        [["#"]],
        [["...", ".#.", "..."]],
        [["....#", "###.#", "...#.", ".#...", "....."]],
        [["." * 30] * 30],
        [["..#", "###", "..."]],
    ],
)
function(
    "lru-simulation",
    3,
    "def lru_misses(capacity: int, accesses: list[int]) -> int",
    "Simulate an LRU cache holding at most capacity keys (capacity >= 1) over the access sequence and return the number of misses.",
    "from collections import OrderedDict\n\ndef lru_misses(capacity, accesses):\n    cache, misses = OrderedDict(), 0\n    for k in accesses:\n        if k in cache:\n            cache.move_to_end(k)\n        else:\n            misses += 1\n            cache[k] = True\n            if len(cache) > capacity:\n                cache.popitem(last=False)\n    return misses\n",
    [[2, [1, 2, 1, 3, 2]], [1, [1, 1, 1]]],
    [[3, []], [1, [1, 2, 1, 2]], [2, [1, 2, 3, 1, 2, 3]], [3, ints(100, 1, 6)], [10, ints(500, 1, 15)]],
)
function(
    "evaluate-expression",
    3,
    "def evaluate(expr: str) -> int",
    "Evaluate an arithmetic expression of non-negative integers, +, -, * and parentheses, with the usual precedence (* before + and -, left to right). Spaces may appear anywhere. Do not use eval.",
    "def evaluate(expr):\n    toks = [c for c in expr if not c.isspace()]\n    pos = 0\n    def number():\n        nonlocal pos\n        if toks[pos] == '(':\n            pos += 1\n            v = add()\n            pos += 1\n            return v\n        start = pos\n        while pos < len(toks) and toks[pos].isdigit():\n            pos += 1\n        return int(''.join(toks[start:pos]))\n    def mul():\n        nonlocal pos\n        v = number()\n        while pos < len(toks) and toks[pos] == '*':\n            pos += 1\n            v *= number()\n        return v\n    def add():\n        nonlocal pos\n        v = mul()\n        while pos < len(toks) and toks[pos] in '+-':\n            op = toks[pos]\n            pos += 1\n            w = mul()\n            v = v + w if op == '+' else v - w\n        return v\n    return add()\n",
    [["2 + 3 * 4"], ["(2 + 3) * 4"]],
    [["7"], ["10 - 4 - 3"], ["2*(3+(4-1))*2"], ["100 * 0 + 1"], [" 12 +  30 "], ["((((5))))"], ["1-2*3+4*5-6"]],
)
function(
    "knapsack",
    3,
    "def knapsack(weights: list[int], values: list[int], capacity: int) -> int",
    "0/1 knapsack: return the largest total value of items (each used at most once) whose total weight is at most capacity.",
    "def knapsack(weights, values, capacity):\n    best = [0] * (capacity + 1)\n    for w, v in zip(weights, values):\n        for c in range(capacity, w - 1, -1):\n            best[c] = max(best[c], best[c - w] + v)\n    return best[capacity]\n",
    [[[1, 3, 4, 5], [1, 4, 5, 7], 7], [[5], [10], 4]],
    [
        [[], [], 10],
        [[1, 2, 3], [6, 10, 12], 5],
        [ints(20, 1, 30), ints(20, 1, 100), 100],
        [[10, 20, 30], [60, 100, 120], 50],
        [[3, 3, 3], [5, 5, 5], 0],
    ],
)
function(
    "spiral-order",
    3,
    "def spiral(m: list[list[int]]) -> list[int]",
    "Return the elements of the rectangular matrix m in clockwise spiral order, starting at the top-left.",
    "def spiral(m):\n    out = []\n    m = [row[:] for row in m]\n    while m:\n        out += m.pop(0)\n        m = [list(r) for r in zip(*m)][::-1]\n    return out\n",
    [[[[1, 2, 3], [4, 5, 6], [7, 8, 9]]], [[[1, 2], [3, 4]]]],
    [[[]], [[[1]]], [[[1, 2, 3, 4]]], [[[1], [2], [3]]], [[[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]]]],
)
function(
    "unique-permutations",
    3,
    "def permutations(s: str) -> list[str]",
    "Return all distinct permutations of the characters of s, as a list in any order.",
    "from itertools import permutations as perms\n\ndef permutations(s):\n    return sorted({''.join(p) for p in perms(s)})\n",
    [["abc"], ["aab"]],
    [[""], ["a"], ["aa"], ["abcd"], ["aabb"]],
    compare="unordered",
)


# --- stdin/stdout tasks: (id, difficulty, statement, solution, example inputs, hidden inputs)

STDIO: list[dict] = []


def stdio(id, difficulty, prompt, solution, examples, tests, title=None):
    STDIO.append(
        dict(
            id=id, difficulty=difficulty, prompt=prompt, solution=solution, examples=examples, tests=tests, title=title
        )
    )


def lines(*rows) -> str:
    return "".join(f"{r}\n" for r in rows)


stdio(
    "sum-two",
    1,
    "The input is one line with two integers a and b. Print a + b.",
    "a, b = map(int, input().split())\nprint(a + b)\n",
    [lines("1 2"), lines("-5 5")],
    [lines("0 0"), lines("1000000000 1000000000"), lines("-7 -8"), lines("123 -456")],
)
stdio(
    "echo-upper",
    1,
    "Print every input line in upper case, in order.",
    "import sys\nfor line in sys.stdin:\n    print(line.rstrip('\\n').upper())\n",
    [lines("hello", "World")],
    [lines("a"), lines("MiXeD cAsE", "123 abc"), lines("x", "y", "z")],
)
stdio(
    "count-lines-words",
    1,
    "Print two numbers separated by a space: the number of lines and the number of whitespace-separated words in the input.",
    "import sys\ndata = sys.stdin.read()\nprint(len(data.splitlines()), len(data.split()))\n",
    [lines("one two", "three")],
    [lines(""), lines("a b c d"), lines("x", "", "y z"), lines("  spaced   words  ")],
)
stdio(
    "min-max",
    1,
    "The first line holds n >= 1; the second holds n integers. Print the minimum and the maximum, separated by a space.",
    "input()\nxs = list(map(int, input().split()))\nprint(min(xs), max(xs))\n",
    [lines("3", "4 -2 9")],
    [
        lines("1", "7"),
        lines("5", "1 1 1 1 1"),
        lines("6", " ".join(map(str, ints(6, -99, 99)))),
        lines("40", " ".join(map(str, ints(40, -(10**9), 10**9)))),
    ],
)
stdio(
    "even-numbers",
    1,
    "The input holds integers separated by whitespace. Print the even ones, one per line, in input order.",
    "import sys\nfor x in sys.stdin.read().split():\n    if int(x) % 2 == 0:\n        print(int(x))\n",
    [lines("1 2 3 4")],
    [lines("1 3 5"), lines("0 -2 -3"), lines(" ".join(map(str, ints(25, -50, 50)))), lines("10", "11", "12")],
)
stdio(
    "frequency-table",
    2,
    "The input holds words separated by whitespace. For each distinct word print the word and its count, separated by a space, most frequent first; ties in alphabetical order.",
    "import sys\nfrom collections import Counter\ncounts = Counter(sys.stdin.read().split())\nfor w, c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):\n    print(w, c)\n",
    [lines("b a b c a b")],
    [lines("x"), lines("the cat the dog the end"), lines(" ".join(words(40, "abc", 1, 2))), lines("a b c d")],
)
stdio(
    "matrix-sum",
    2,
    "The first line holds r and c; r lines of c integers follow. Print the row sums on one line, then the column sums on the next line (numbers separated by spaces).",
    "r, c = map(int, input().split())\nm = [list(map(int, input().split())) for _ in range(r)]\nprint(*[sum(row) for row in m])\nprint(*[sum(col) for col in zip(*m)])\n",
    [lines("2 3", "1 2 3", "4 5 6")],
    [
        lines("1 1", "7"),
        lines("3 2", "1 -1", "2 -2", "3 -3"),
        lines("4 4", *[" ".join(map(str, ints(4, -9, 9))) for _ in range(4)]),
    ],
)
stdio(
    "balanced-lines",
    2,
    "For each input line print YES if its brackets (), [] and {} are balanced and properly nested, else NO. Other characters are ignored.",
    "import sys\npairs = {')': '(', ']': '[', '}': '{'}\nfor line in sys.stdin.read().splitlines():\n    stack, ok = [], True\n    for ch in line:\n        if ch in '([{':\n            stack.append(ch)\n        elif ch in pairs:\n            if not stack or stack.pop() != pairs[ch]:\n                ok = False\n                break\n    print('YES' if ok and not stack else 'NO')\n",
    [lines("([])", "(]")],
    [lines(""), lines("{[()]}", "((", "a(b)c", "])"), lines("x", "(((())))", "([)]")],
)
stdio(
    "binary-conversion",
    2,
    "Each input line holds a non-negative integer n. Print n in binary (no prefix) on its own line.",
    "import sys\nfor line in sys.stdin.read().split():\n    print(bin(int(line))[2:])\n",
    [lines("5", "0")],
    [lines("1"), lines("255", "256"), lines(str(2**40 + 3)), lines(*map(str, ints(5, 0, 10**6)))],
)
stdio(
    "gpa-report",
    2,
    "Each input line is a student name followed by integer scores. Print each student's name and average score rounded to two decimals (format with '%.2f'), in the input order.",
    "import sys\nfor line in sys.stdin.read().splitlines():\n    if line.strip():\n        name, *scores = line.split()\n        print(name, '%.2f' % (sum(map(int, scores)) / len(scores)))\n",
    [lines("ann 90 80", "bob 70")],
    [lines("cy 100 100 99"), lines("dee 1 2", "eve 0 0 1"), lines("fay 33 33 34")],
)
stdio(
    "connected-components",
    3,
    "The first line holds n (nodes 1..n) and m; m lines with edges 'u v' follow. Print the number of connected components.",
    "import sys\ndata = sys.stdin.read().split()\nn, m = int(data[0]), int(data[1])\nparent = list(range(n + 1))\ndef find(x):\n    while parent[x] != x:\n        parent[x] = parent[parent[x]]\n        x = parent[x]\n    return x\nfor i in range(m):\n    u, v = int(data[2 + 2 * i]), int(data[3 + 2 * i])\n    parent[find(u)] = find(v)\nprint(len({find(x) for x in range(1, n + 1)}))\n",
    [lines("5 3", "1 2", "2 3", "4 5")],
    [
        lines("1 0"),
        lines("4 0"),
        lines("3 3", "1 2", "2 3", "3 1"),
        lines("100 60", *[f"{a} {b}" for a, b in zip(ints(60, 1, 100), ints(60, 1, 100))]),
    ],
)
stdio(
    "dijkstra",
    3,
    "The first line holds n, m and s; m lines 'u v w' describe directed edges u -> v of weight w >= 0 (nodes 1..n). Print the shortest distance from s to every node 1..n on one line, separated by spaces, with -1 for unreachable nodes.",
    "import heapq, sys\ndata = list(map(int, sys.stdin.read().split()))\nn, m, s = data[:3]\nadj = [[] for _ in range(n + 1)]\nfor i in range(m):\n    u, v, w = data[3 + 3 * i : 6 + 3 * i]\n    adj[u].append((v, w))\ndist = [None] * (n + 1)\nheap = [(0, s)]\nwhile heap:\n    d, u = heapq.heappop(heap)\n    if dist[u] is not None:\n        continue\n    dist[u] = d\n    for v, w in adj[u]:\n        if dist[v] is None:\n            heapq.heappush(heap, (d + w, v))\nprint(*[-1 if d is None else d for d in dist[1:]])\n",
    [lines("3 3 1", "1 2 4", "1 3 1", "3 2 2")],
    [
        lines("1 0 1"),
        lines("3 1 2", "2 3 5"),
        lines("4 4 1", "1 2 1", "2 3 1", "3 4 1", "1 4 10"),
        lines("30 80 1", *[f"{a} {b} {c}" for a, b, c in zip(ints(80, 1, 30), ints(80, 1, 30), ints(80, 0, 50))]),
    ],
)
stdio(
    "max-subarray",
    3,
    "The first line holds n >= 1; the second n integers. Print the largest sum of a non-empty contiguous subarray. n may be up to 100,000.",
    "input()\nbest = cur = None\nfor x in map(int, input().split()):\n    cur = x if cur is None or cur < 0 else cur + x\n    best = cur if best is None or cur > best else best\nprint(best)\n",
    [lines("5", "-2 1 -3 4 -1")],
    [
        lines("1", "-5"),
        lines("3", "-3 -2 -1"),
        lines("6", "1 2 3 -100 4 5"),
        lines("50000", " ".join(map(str, ints(50000, -1000, 1000)))),
    ],
)
stdio(
    "calendar-day",
    3,
    "Each input line is a date YYYY-MM-DD (Gregorian). Print the day of the week in English (e.g. Monday) for each line.",
    "import sys, datetime\nfor line in sys.stdin.read().split():\n    print(datetime.date.fromisoformat(line).strftime('%A'))\n",
    [lines("2026-11-22", "2000-01-01")],
    [lines("1970-01-01"), lines("2024-02-29", "1900-03-01"), lines("2099-12-31", "1600-02-29")],
)


def run_function(solution: str, entry: str, args: list):
    namespace: dict = {"__name__": "reference"}
    exec(solution, namespace)
    value = namespace[entry](*json.loads(json.dumps(args)))
    return json.loads(json.dumps(value))


def run_stdio(solution: str, text: str) -> str:
    out = io.StringIO()
    stdin, sys.stdin = sys.stdin, io.StringIO(text)
    try:
        with contextlib.redirect_stdout(out):
            exec(solution, {"__name__": "__main__"})
    finally:
        sys.stdin = stdin
    return out.getvalue()


def build() -> list[dict]:
    records = []
    for t in FUNCTIONS:
        entry = t["signature"].split("(")[0].removeprefix("def ").strip()
        case = lambda a, t=t, entry=entry: {"args": a, "expected": run_function(t["solution"], entry, a)}  # noqa: E731
        rec = {
            "id": t["id"],
            "kind": "function",
            "difficulty": t["difficulty"],
            "entry_point": entry,
            "signature": t["signature"],
            "prompt": t["prompt"],
            "examples": [case(a) for a in t["examples"]],
            "tests": [case(a) for a in t["tests"]],
            "solution": t["solution"],
        }
        if t["compare"] != "exact":
            rec["compare"] = t["compare"]
        records.append(rec)
    for t in STDIO:
        case = lambda i, t=t: {"input": i, "output": run_stdio(t["solution"], i)}  # noqa: E731
        records.append(
            {
                "id": t["id"],
                "kind": "stdio",
                "difficulty": t["difficulty"],
                "prompt": t["prompt"],
                "examples": [case(i) for i in t["examples"]],
                "tests": [case(i) for i in t["tests"]],
                "solution": t["solution"],
            }
        )
    return records


if __name__ == "__main__":
    records = build()
    with OUT.open("w", encoding="utf-8") as f:
        for rec in records:
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    print(f"wrote {len(records)} tasks to {OUT}")  # noqa: T201
