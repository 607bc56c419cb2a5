package demo

// The correct project; each bug edits one file of it.
var files = map[string]string{
	"setup.py": `from setuptools import setup, find_packages

setup(name="calc", version="0.1", packages=find_packages(exclude=["tests"]))
`,
	"calc/__init__.py": `"""Small helpers: statistics, text and calendar."""
`,
	"calc/stats.py": `"""Descriptive statistics."""


def mean(xs):
    if not xs:
        raise ValueError("mean of an empty sequence")
    return sum(xs) / len(xs)


def median(xs):
    if not xs:
        raise ValueError("median of an empty sequence")
    s = sorted(xs)
    mid = len(s) // 2
    if len(s) % 2:
        return s[mid]
    return (s[mid - 1] + s[mid]) / 2


def variance(xs):
    m = mean(xs)
    return sum((x - m) ** 2 for x in xs) / len(xs)
`,
	"calc/text.py": `"""Text helpers."""
import re


def slugify(s):
    s = re.sub(r"[^a-z0-9]+", "-", s.lower())
    return s.strip("-")


def truncate(s, width, suffix="..."):
    if len(s) <= width:
        return s
    return s[: max(0, width - len(suffix))] + suffix
`,
	"calc/dates.py": `"""Calendar helpers."""


def is_leap_year(year):
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def days_in_month(year, month):
    if month == 2:
        return 29 if is_leap_year(year) else 28
    if month in (4, 6, 9, 11):
        return 30
    return 31
`,
	"tests/__init__.py": "",
	"tests/test_stats.py": `import unittest

from calc.stats import mean, median, variance


class TestStats(unittest.TestCase):
    def test_mean(self):
        self.assertEqual(mean([1, 2, 3]), 2)

    def test_median_odd(self):
        self.assertEqual(median([3, 1, 2]), 2)

    def test_variance(self):
        self.assertEqual(variance([2, 2, 2]), 0)
`,
	"tests/test_text.py": `import unittest

from calc.text import slugify, truncate


class TestText(unittest.TestCase):
    def test_slugify(self):
        self.assertEqual(slugify("Hello, World"), "hello-world")

    def test_truncate_short(self):
        self.assertEqual(truncate("abc", 5), "abc")
`,
	"tests/test_dates.py": `import unittest

from calc.dates import days_in_month, is_leap_year


class TestDates(unittest.TestCase):
    def test_leap(self):
        self.assertTrue(is_leap_year(2024))

    def test_april(self):
        self.assertEqual(days_in_month(2023, 4), 30)
`,
}

// Bug is one instance: a one-line break of a correct function, and the test
// that catches it.
type Bug struct {
	ID        string
	File      string // the source file the bug edits
	Old, New  string // the correct text and its broken replacement
	TestFile  string
	TestAfter string // a line of the test file after which NewTest goes
	NewTest   string
	Problem   string
}

// Bugs are the demo's instances.
var Bugs = []Bug{
	{
		ID: "demo__calc-1", File: "calc/stats.py",
		Old: "    return (s[mid - 1] + s[mid]) / 2\n", New: "    return s[mid]\n",
		TestFile: "tests/test_stats.py", TestAfter: "        self.assertEqual(median([3, 1, 2]), 2)\n",
		NewTest: "\n    def test_median_even(self):\n        self.assertEqual(median([4, 1, 3, 2]), 2.5)\n",
		Problem: "median() of an even-length list returns the upper middle element instead of the mean of the two middle elements.",
	},
	{
		ID: "demo__calc-2", File: "calc/dates.py",
		Old: "    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)\n", New: "    return year % 4 == 0 and year % 100 != 0\n",
		TestFile: "tests/test_dates.py", TestAfter: "        self.assertTrue(is_leap_year(2024))\n",
		NewTest: "\n    def test_leap_400(self):\n        self.assertTrue(is_leap_year(2000))\n        self.assertEqual(days_in_month(2000, 2), 29)\n",
		Problem: "is_leap_year(2000) is False: years divisible by 400 are leap years.",
	},
	{
		ID: "demo__calc-3", File: "calc/text.py",
		Old: "    return s[: max(0, width - len(suffix))] + suffix\n", New: "    return s[:width] + suffix\n",
		TestFile: "tests/test_text.py", TestAfter: "        self.assertEqual(truncate(\"abc\", 5), \"abc\")\n",
		NewTest: "\n    def test_truncate_long(self):\n        self.assertEqual(truncate(\"abcdefgh\", 6), \"abc...\")\n        self.assertEqual(len(truncate(\"x\" * 50, 10)), 10)\n",
		Problem: "truncate() returns strings longer than width: the suffix is not counted.",
	},
	{
		ID: "demo__calc-4", File: "calc/stats.py",
		Old: "        raise ValueError(\"mean of an empty sequence\")\n", New: "        return 0\n",
		TestFile: "tests/test_stats.py", TestAfter: "        self.assertEqual(mean([1, 2, 3]), 2)\n",
		NewTest: "\n    def test_mean_empty(self):\n        with self.assertRaises(ValueError):\n            mean([])\n",
		Problem: "mean([]) returns 0 instead of raising ValueError, which hides empty inputs.",
	},
}
