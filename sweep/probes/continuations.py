"""Prompts a base model continues: the built-in classes in the completion form (a model without a chat template).

A base model does not follow instructions; it continues text. Each prompt is therefore the beginning of a
document whose natural continuation is the workload's kind of text:

- `code`: the start of a real module, cut inside a function body, in six languages;
- `tool` (extraction, copying): a document, then the opening of its structured copy (JSON to YAML, CSV to
  JSON, notes to a table, an invoice to JSON, a log to CSV): the answer copies values from the prompt;
- `prose`: the opening of an encyclopedia article or a story, in English and Chinese, a paragraph or more, cut
  where the next sentence begins (a one-sentence opening is repeated by small models to the token limit).

Every prompt is different text (no two share an opening), so no request feeds another's n-gram drafts.
"""

from __future__ import annotations

import json

CODE: list[str] = [
    '''"""Small helpers for working with intervals of integers."""

from __future__ import annotations


def overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    """Whether two closed intervals share at least one point."""
    return a[0] <= b[1] and b[0] <= a[1]


def merge_intervals(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Merge overlapping intervals and return them sorted by their start."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(intervals):
''',
    """#include <stdio.h>
#include <stdlib.h>

struct node {
    int value;
    struct node *next;
};

/* Allocates a node holding `value`, or returns NULL when memory runs out. */
static struct node *node_new(int value) {
    struct node *n = malloc(sizeof *n);
    if (n != NULL) {
        n->value = value;
        n->next = NULL;
    }
    return n;
}

/* Reverses the list starting at `head` in place and returns the new head. */
static struct node *reverse(struct node *head) {
    struct node *prev = NULL;
""",
    """import java.util.HashMap;
import java.util.Map;

/** Counts how often each word appears in a text. */
public final class WordCounter {
    private final Map<String, Integer> counts = new HashMap<>();

    /** Adds every word of {@code line} to the counts. */
    public void add(String line) {
        for (String word : line.toLowerCase().split("\\\\W+")) {
""",
    """// Flattening nested arrays for the report exporter.

/**
 * Whether a value is a plain array (not a string or a typed array).
 * @param {unknown} value
 * @returns {boolean}
 */
function isArray(value) {
  return Array.isArray(value);
}

/**
 * Flattens an arbitrarily nested array of numbers into one array, keeping their order.
 * @param {unknown[]} items
 * @returns {number[]}
 */
function flatten(items) {
  const out = [];
  for (const item of items) {
""",
    """package queue

import "sync"

// Bounded is a FIFO queue that holds at most Cap items.
type Bounded struct {
	mu    sync.Mutex
	items []int
	Cap   int
}

// Len returns the number of items waiting in the queue.
func (q *Bounded) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items)
}

// TryPut adds v at the back of the queue and reports whether there was room.
func (q *Bounded) TryPut(v int) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
""",
    '''"""Reading the sensor export (one reading per line: timestamp, sensor id, value)."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class Reading:
    at: datetime
    sensor: str
    value: float


def read_readings(path: str) -> list[Reading]:
    """Every reading in the CSV file at `path`, oldest first; rows with a bad value are skipped."""
    readings = []
    with open(path, newline="", encoding="utf-8") as file:
        for row in csv.reader(file):
''',
    """import { readFile } from "node:fs/promises";

export interface User {
  id: number;
  name: string;
  email: string;
}

/** Loads the users from a JSON file, failing loudly on a malformed entry. */
export async function loadUsers(path: string): Promise<User[]> {
  const raw = JSON.parse(await readFile(path, "utf8"));
  if (!Array.isArray(raw)) {
    throw new Error(`${path}: expected a list of users`);
  }
""",
    """package geo

import "math"

// Point is a position in degrees of latitude and longitude.
type Point struct {
	Lat, Lon float64
}

const earthRadiusKm = 6371.0

func radians(deg float64) float64 {
	return deg * math.Pi / 180
}

// Distance returns the great-circle distance between a and b in kilometres (haversine formula).
func Distance(a, b Point) float64 {
	dLat := radians(b.Lat - a.Lat)
""",
    """use std::collections::HashMap;

/// Counts the words of `text`, case-insensitively.
pub fn word_counts(text: &str) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for word in text.split_whitespace() {
        let word = word.trim_matches(|c: char| !c.is_alphanumeric()).to_lowercase();
        if word.is_empty() {
            continue;
        }
""",
    """#include <string.h>

/* Returns 1 if `s` reads the same backwards, ignoring case and anything that is not a letter or digit. */
int is_palindrome(const char *s) {
    size_t i = 0;
    size_t j = strlen(s);
    while (i < j) {
""",
    """const express = require("express");

const app = express();
app.use(express.json());

// POST /sum with {"a": number, "b": number} answers {"sum": a + b}; anything else is a 400.
app.post("/sum", (req, res) => {
  const { a, b } = req.body ?? {};
""",
    '''"""Retrying flaky network calls with exponential back-off."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def retry(call: Callable[[], T], attempts: int = 5, base_delay: float = 0.5) -> T:
    """Call `call` until it succeeds, waiting longer (with jitter) after each failure."""
    for attempt in range(attempts):
        try:
            return call()
        except OSError:
''',
    """/// A fixed-size ring buffer that overwrites its oldest element when full.
pub struct Ring<T> {
    items: Vec<Option<T>>,
    head: usize,
    len: usize,
}

impl<T> Ring<T> {
    /// An empty ring that holds at most `capacity` elements.
    pub fn new(capacity: usize) -> Self {
        assert!(capacity > 0, "a ring needs room for one element");
        let mut items = Vec::with_capacity(capacity);
""",
    '''"""Statistics for the nightly report."""

from __future__ import annotations

import math
from collections.abc import Sequence


def mean(values: Sequence[float]) -> float:
    """The arithmetic mean; ValueError for no values."""
    if not values:
        raise ValueError("mean of no values")
    return sum(values) / len(values)


def stdev(values: Sequence[float]) -> float:
    """The sample standard deviation (n - 1 in the denominator)."""
    if len(values) < 2:
        raise ValueError("stdev needs at least two values")
''',
    """CREATE TABLE members (
    id          INTEGER PRIMARY KEY,
    name        TEXT NOT NULL,
    email       TEXT NOT NULL UNIQUE,
    joined_on   DATE NOT NULL
);

CREATE TABLE books (
    id          INTEGER PRIMARY KEY,
    title       TEXT NOT NULL,
    author      TEXT NOT NULL,
    isbn        TEXT UNIQUE
);

CREATE TABLE loans (
""",
    """#include <stdint.h>
#include <stddef.h>

/* CRC-32 (IEEE 802.3, reflected, polynomial 0xEDB88320) of `len` bytes at `data`. */
uint32_t crc32(const uint8_t *data, size_t len) {
    uint32_t crc = 0xFFFFFFFFu;
    for (size_t i = 0; i < len; i++) {
""",
    """import java.util.ArrayDeque;
import java.util.Deque;

/** Checks that brackets in source text are balanced: (), [] and {}. */
public final class Brackets {
    private Brackets() {}

    public static boolean balanced(String text) {
        Deque<Character> open = new ArrayDeque<>();
        for (char c : text.toCharArray()) {
""",
    """/**
 * Debounces a function: it runs once, `wait` milliseconds after the last call.
 * @template {unknown[]} A
 * @param {(...args: A) => void} fn
 * @param {number} wait
 * @returns {(...args: A) => void}
 */
export function debounce(fn, wait) {
  let timer = null;
  return (...args) => {
""",
    '''"""Parsing durations such as "1h30m" or "45s" from the command line."""

from __future__ import annotations

import re

UNITS = {"h": 3600, "m": 60, "s": 1}
PART = re.compile(r"(\\d+)([hms])")


def parse_duration(text: str) -> int:
    """Seconds in a duration made of hours, minutes and seconds; ValueError for anything else."""
    text = text.strip().lower()
    if not text:
        raise ValueError("empty duration")
    total = 0
    position = 0
    for match in PART.finditer(text):
''',
    """package inventory

import "errors"

// ErrOutOfStock is returned when an order asks for more than the warehouse holds.
var ErrOutOfStock = errors.New("out of stock")

// Stock maps product codes to the units in the warehouse.
type Stock map[string]int

// Reserve takes qty units of code out of stock, or fails without changing anything.
func (s Stock) Reserve(code string, qty int) error {
	if qty <= 0 {
		return errors.New("quantity must be positive")
	}
""",
    """use std::fs;
use std::io;
use std::path::Path;

/// The total size in bytes of every file under `dir`, following no symbolic links.
pub fn tree_size(dir: &Path) -> io::Result<u64> {
    let mut total = 0;
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
""",
    '''"""Turning the shop's order export into the accounting format."""

from __future__ import annotations

import json
from decimal import Decimal


def order_lines(path: str) -> list[dict[str, object]]:
    """One dict per order line in the JSON export at `path`, with the amount as a Decimal."""
    with open(path, encoding="utf-8") as file:
        orders = json.load(file)["orders"]
    lines = []
    for order in orders:
        for item in order["items"]:
''',
    """#include <ctype.h>
#include <stdio.h>

/* Counts lines, words and bytes of a stream, as wc does. */
static void count(FILE *in, long *lines, long *words, long *bytes) {
    int c;
    int in_word = 0;
    *lines = *words = *bytes = 0;
    while ((c = fgetc(in)) != EOF) {
""",
    """type Handler<E> = (event: E) => void;

/** A minimal typed event emitter. */
export class Emitter<E> {
  private handlers: Handler<E>[] = [];

  /** Registers a handler and returns a function that removes it again. */
  on(handler: Handler<E>): () => void {
    this.handlers.push(handler);
""",
    '''"""Breadth-first search over a grid maze ('#' walls, '.' open, 'S' start, 'E' exit)."""

from __future__ import annotations

from collections import deque


def shortest_exit(maze: list[str]) -> int | None:
    """Steps from S to E moving up, down, left or right; None where E cannot be reached."""
    rows, cols = len(maze), len(maze[0])
    start = next((r, c) for r in range(rows) for c in range(cols) if maze[r][c] == "S")
    queue = deque([(start, 0)])
    seen = {start}
    while queue:
''',
    """-- Members with a loan that is more than 14 days old and not yet returned, longest overdue first.
SELECT m.name,
       b.title,
""",
    '''"""Word counting for the search index."""

from __future__ import annotations

import re
from collections import Counter

WORD = re.compile(r"[a-z']+")


def words(text: str) -> list[str]:
    """The lower-case words of `text`, in order."""
    return WORD.findall(text.lower())


def top_words(path: str, n: int = 10) -> list[tuple[str, int]]:
    """The `n` most common words in the file at `path`, with their counts."""
    counts: Counter[str] = Counter()
    with open(path, encoding="utf-8") as file:
''',
    """use std::net::Ipv4Addr;

/// Parses one decimal octet ("0" to "255", no leading zeros).
fn parse_octet(part: &str) -> Option<u8> {
    if part.is_empty() || (part.len() > 1 && part.starts_with('0')) {
        return None;
    }
    part.parse::<u8>().ok()
}

/// Parses a dotted-quad IPv4 address such as "192.168.0.1" without regular expressions.
pub fn parse_ipv4(text: &str) -> Option<Ipv4Addr> {
    let parts: Vec<&str> = text.split('.').collect();
""",
    '''"""A tiny least-recently-used cache."""

from __future__ import annotations

from collections import OrderedDict
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class LruCache(Generic[K, V]):
    """Keeps at most `capacity` entries, dropping the least recently used one first."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self._items: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
''',
    '''"""Validation of the signup form."""

from __future__ import annotations

import re

EMAIL = re.compile(r"^[^@\\s]+@[^@\\s]+\\.[a-z]{2,}$", re.IGNORECASE)


class FormError(ValueError):
    """A field of the form that cannot be accepted, with the reason."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field


def validate_signup(form: dict[str, str]) -> dict[str, str]:
    """The cleaned form, or FormError for the first field that is wrong."""
    email = form.get("email", "").strip()
    if not EMAIL.match(email):
''',
    """import java.time.LocalDate;
import java.time.format.DateTimeParseException;
import java.util.Optional;

/** Parsing of the dates users type into the booking form. */
public final class Dates {
    private Dates() {}

    /** The date in {@code text} (ISO-8601, such as 2024-09-17), or empty when it is not a valid date. */
    public static Optional<LocalDate> parse(String text) {
        if (text == null || text.isBlank()) {
            return Optional.empty();
        }
""",
    """package slug

import (
	"strings"
	"unicode"
)

// Make turns a title into a URL slug: lower case, words joined by single hyphens, other characters dropped.
func Make(title string) string {
	var b strings.Builder
	lastHyphen := true
	for _, r := range strings.ToLower(title) {
""",
    """import java.util.ArrayList;
import java.util.List;

/** A matrix of doubles stored row by row. */
public final class Matrix {
    private final int rows;
    private final int cols;
    private final double[] data;

    public Matrix(int rows, int cols) {
        this.rows = rows;
        this.cols = cols;
        this.data = new double[rows * cols];
    }

    /** The product of this matrix and {@code other}. */
    public Matrix times(Matrix other) {
        if (cols != other.rows) {
""",
    """package cache

import (
	"sync"
	"time"
)

type entry struct {
	value   string
	expires time.Time
}

// TTL is a string cache whose entries expire after a fixed time.
type TTL struct {
	mu      sync.Mutex
	ttl     time.Duration
	entries map[string]entry
}

// Get returns the value for key if it is present and has not expired.
func (c *TTL) Get(key string) (string, bool) {
""",
    """/// Returns the `n`-th Fibonacci number, or None where it does not fit in a u64.
pub fn fibonacci(n: u32) -> Option<u64> {
    let (mut a, mut b) = (0u64, 1u64);
    for _ in 0..n {
""",
    """#!/usr/bin/env bash
# Back up the photo folder to the external disk, keeping the last seven daily copies.
set -euo pipefail

SOURCE="$HOME/Pictures"
TARGET="/mnt/backup/photos"
STAMP="$(date +%Y-%m-%d)"

if [ ! -d "$TARGET" ]; then
""",
]


PROSE: list[str] = [
    """# The Vasa (ship)

The Vasa is a Swedish warship built between 1626 and 1628. The ship sank after sailing about 1,300 metres into her maiden voyage on 10 August 1628. She fell into obscurity after most of her valuable bronze cannons were salvaged in the 17th century, until she was located again in the late 1950s in a busy shipping lane in Stockholm harbour.

## Construction

The ship was ordered by King Gustavus Adolphus
""",
    """# 茶

茶是一种以茶树的叶子制成的饮料，原产于中国西南地区。饮茶的习惯在唐代传遍全国，并经由丝绸之路传到中亚和欧洲。

## 种类

根据加工方法的不同，茶通常分为绿茶、红茶、乌龙茶、白茶、黄茶和黑茶六大类。其中，绿茶
""",
    """# Skarvik Point Lighthouse

Skarvik Point Lighthouse is a lighthouse on the western coast of Norway, about twelve kilometres north of the fishing town of Lindesvik. It was built in 1874 to mark the entrance to the Skarvik fjord, where more than thirty ships had been lost in the previous fifty years.

## History

The first tower was made of wood and lit by a paraffin lamp.
""",
    """# Tidal power

Tidal power or tidal energy is harnessed by converting energy from tides into useful forms of power, mainly electricity. Although not yet widely used, tidal energy has the potential for future electricity generation. Tides are more predictable than the wind and the sun.

## Generating methods

Tidal power can be generated in three ways:
""",
    """# Volcano

A volcano is a rupture in the crust of a planetary-mass object, such as Earth, that allows hot lava, volcanic ash, and gases to escape from a magma chamber below the surface. On Earth, volcanoes are most often found where tectonic plates are diverging or converging.

## Eruption styles

Volcanoes differ in how they erupt. In an effusive eruption,
""",
    """The ferry to Holm Island leaves the harbour at seven in the morning, and in October it is usually empty. I took it on a Tuesday, with a borrowed bicycle and a paper map that the woman at the guesthouse had drawn for me. The island is small, barely four kilometres from end to end, but it has a church, two farms, a school with nine pupils and a café that opens only when the ferry is in.

The first thing you notice when you step off the boat is
""",
    """# Printing press

A printing press is a mechanical device for applying pressure to an inked surface resting upon a print medium, such as paper or cloth, thereby transferring the ink. It marked a dramatic improvement on earlier printing methods, in which the cloth, paper or other medium was brushed or rubbed repeatedly.

## Gutenberg

Around 1440, the goldsmith Johannes Gutenberg of Mainz
""",
    """# Coral reef

A coral reef is an underwater ecosystem characterized by reef-building corals. Reefs are formed of colonies of coral polyps held together by calcium carbonate. Most coral reefs are built from stony corals, whose polyps cluster in groups.

## Distribution

Coral reefs cover less than one percent of the ocean floor, yet
""",
    """Mrs. Adeyemi had taught mathematics at the Saint Luke school for thirty-one years, and in all that time she had never once been late. So when the bell rang on the first Monday of term and her classroom was still locked, the children gathered in the corridor and waited in a silence that none of them could later explain.

It was Kofi, the smallest boy in the class, who
""",
    """# Glacier

A glacier is a persistent body of dense ice that is constantly moving downhill under its own weight. A glacier forms where the accumulation of snow exceeds its ablation over many years, often centuries. Glaciers slowly deform and flow due to stresses induced by their weight.

## Formation

Glaciers form where snow
""",
    """# 都江堰

都江堰位于四川省成都市西北的岷江上，是战国时期秦国蜀郡太守李冰父子主持修建的大型水利工程。两千多年来，它一直发挥着防洪和灌溉的作用，使成都平原成为“天府之国”。

## 结构

都江堰主要由鱼嘴、飞沙堰和宝瓶口三部分组成。鱼嘴
""",
    """# Lighthouse

A lighthouse is a tower, building, or other type of physical structure designed to emit light from a system of lamps and lenses and to serve as a beacon for navigational aid for maritime pilots at sea or on inland waterways.

## History

Before the development of clearly defined ports, mariners were guided by
""",
    """# Origami

Origami is the Japanese art of paper folding. In modern usage, the word origami is often used as an inclusive term for all folding practices, regardless of their culture of origin. The goal is to transform a flat square sheet of paper into a finished sculpture through folding and sculpting techniques.

## History

Distinct paperfolding traditions arose in Europe, China, and Japan.
""",
    """The night train from Vienna was forty minutes late, and by the time it pulled into the station at Ljubljana the platform lights had already been dimmed. Only one passenger got off: a tall man in a grey coat, carrying a violin case and nothing else. He stood for a while under the clock, as if he expected somebody, and then he walked out into the rain.

The stationmaster, who had seen
""",
    """# Windmill

A windmill is a structure that converts wind power into rotational energy using vanes called sails or blades, by tradition specifically to mill grain, but in some parts of the English-speaking world, the term has also been extended to windpumps, wind turbines, and other applications.

## Types

The earliest windmills were of the horizontal type,
""",
    """# Penguin

Penguins are a group of aquatic flightless birds from the family Spheniscidae of the order Sphenisciformes. They live almost exclusively in the Southern Hemisphere. Only one species, the Galápagos penguin, is found north of the Equator.

## Diet

Penguins feed mainly on krill, fish and squid. They
""",
    """# 活字印刷术

活字印刷术是一种古代印刷方法，由北宋时期的毕昇发明。他用胶泥制成一个个单字，用火烧硬，排版时把需要的字按顺序排在铁板上，印完后还可以拆下来再用。

## 发展

元代的王祯改用木头制作活字，
""",
    """The letter from the council arrived on a Thursday, which was market day, so by noon everyone in Ashby knew that the old footbridge would be closed. It had stood over the Wend for a hundred and forty years. Children had carved their names into its railings, couples had been photographed on it, and at least one man had proposed marriage there in the middle of a thunderstorm.

At the meeting that evening,
""",
    """# Hot spring

A hot spring is a spring produced by the emergence of geothermally heated groundwater onto the surface of the Earth. The groundwater is heated either by shallow bodies of magma in volcanic areas, or by circulation through faults to hot rock deep in the Earth's crust.

## Uses

Hot springs have been used for bathing since
""",
    """# Sundial

A sundial is a horological device that tells the time of day when direct sunlight shines, by the apparent position of the Sun in the sky. In the narrowest sense of the word, it consists of a flat plate and a gnomon, which casts a shadow onto the plate.

## History

The earliest sundials known from the archaeological record are
""",
    """# Bicycle

A bicycle, also called a pedal cycle, bike or cycle, is a human-powered, pedal-driven, single-track vehicle, with two wheels attached to a frame, one behind the other. A bicycle rider is called a cyclist, or bicyclist.

## History

The earliest verifiable precursor to the modern bicycle was the
""",
    """# Sourdough

Sourdough is bread made by the fermentation of dough using wild lactobacillaceae and yeast. Lactic acid from fermentation imparts a sour taste and improves keeping qualities.

## History

Sourdough is one of the oldest forms of grain leavening. It is believed to have originated in
""",
    """# 长城

长城是中国古代的军事防御工程，是一道高大、坚固而且连绵不断的长垣，用以限隔敌骑的行动。长城不是一道单纯孤立的城墙，而是以城墙为主体，同大量的城、障、亭、标相结合的防御体系。

## 历史

长城的修筑历史可上溯到西周时期，
""",
    """Chapter One

The lighthouse on Skarvik Point had been automated for eleven years when Marit Olsen came back to live in the keeper's cottage. She told the people in the village that she wanted quiet, and for the first winter that is what she had: wind, the grey sound of the sea, and the slow turn of the lamp above her roof.

On the first calm morning of March, she walked down to the rocks below the cottage and found a green glass bottle wedged between two stones. Inside was a letter.
""",
    """# Honey bee

A honey bee is a eusocial flying insect within the genus Apis of the bee clade. Honey bees are known for their construction of perennial colonial nests from wax, the large size of their colonies, and their surplus production and storage of honey.

## Colony life

A colony usually contains one queen, a few hundred drones and
""",
    """# 大运河

京杭大运河是世界上里程最长、工程最大的古代运河，北起北京，南到杭州，经过今天的北京、天津、河北、山东、江苏和浙江，全长约一千七百九十七公里。

## 历史

大运河的开凿始于春秋时期。公元前486年，吴王夫差
""",
    """# 豆腐

豆腐是以大豆为原料制成的食品，相传起源于西汉时期的淮南王刘安。制作豆腐时，先把大豆浸泡、磨浆、煮沸，再加入盐卤或石膏使豆浆凝固，最后压去多余的水分。

## 吃法

在中国各地，豆腐有许多不同的吃法。在四川，
""",
    """Dear Ingrid,

Your letter reached me on the coldest day of the year, and I read it twice by the stove before I even took my coat off. You ask how the orchard is doing. The truth is that the frost in April took nearly half of the blossom, and we will have fewer apples than in any year since your grandfather planted the first row.

But there is other news, and it is better news.
""",
    """# 二十四节气

二十四节气是中国古代订立的一种用来指导农事的补充历法，它根据太阳在黄道上的位置，把一年划分为二十四个段落。2016年，二十四节气被列入联合国教科文组织人类非物质文化遗产代表作名录。

## 春季

春季的六个节气依次是立春、雨水、惊蛰、春分、清明和谷雨。立春
""",
    """# Moss

Mosses are small, non-vascular flowerless plants that typically form dense green clumps or mats, often in damp or shady locations. The individual plants are usually composed of simple leaves that are generally only one cell thick, attached to a stem that may be branched or unbranched.

## Life cycle

Most mosses reproduce
""",
    """# 敦煌莫高窟

莫高窟位于甘肃省敦煌市东南二十五公里处，开凿在鸣沙山东麓的断崖上。它始建于十六国的前秦时期，历经北朝、隋、唐、五代、西夏、元等朝代的兴建，形成了巨大的规模。

## 艺术

莫高窟现存洞窟七百多个，壁画四万五千多平方米。这些壁画
""",
    """When the river froze that winter, the whole village came down to the bank to look at it. Nobody alive could remember the ice being thick enough to walk on, and for a long time nobody tried. Then the miller's daughter, who was nine years old and afraid of very little, stepped out onto it with her arms spread wide.

The ice held. Behind her,
""",
    """# Semaphore line

A semaphore line was a system of towers that passed messages over long distances by means of pivoting arms or shutters, read through telescopes from the next tower. The first network was built in France in the 1790s by Claude Chappe, and by 1850 it connected Paris with most of the country's large cities.

## Operation

Each tower was staffed by
""",
    """# Olive oil

Olive oil is a liquid fat obtained by pressing whole olives, the fruit of the olive tree, a traditional tree crop of the Mediterranean Basin. It is commonly used in cooking for frying foods or as a salad dressing, and in cosmetics, pharmaceuticals and soaps.

## Production

After the harvest, the olives are
""",
    """# 苏州园林

苏州园林是指中国苏州城内的园林建筑，以私家园林为主，起始于春秋时期吴国建都姑苏时，形成于五代，成熟于宋代，兴旺于明代，鼎盛于清代。1997年，拙政园、留园、网师园和环秀山庄被列入世界文化遗产名录。

## 拙政园

拙政园是苏州最大的古典园林，
""",
    """My grandfather kept bees for fifty years, and he never once wore gloves. He said the bees knew him, and that they could smell fear on a stranger the way a dog can. When I was eight he took me out to the hives behind the pear trees for the first time, and made me stand very still while he lifted the lid.

What I remember most is the sound.
""",
]


PEOPLE = (
    ("Ines Duarte", "Porto"),
    ("Ravi Menon", "Kochi"),
    ("Olga Berg", "Tromso"),
    ("Diego Rojas", "Cusco"),
    ("Mei Lin", "Tainan"),
    ("Yusuf Kaya", "Izmir"),
    ("Hana Novak", "Ljubljana"),
    ("Sam Okoro", "Accra"),
)
PRODUCTS = ("desk lamp", "notebook", "headphones", "water bottle", "backpack", "webcam", "stapler", "kettle")
_TASKS = (
    ("send the budget to finance", "Friday"),
    ("review the supplier contract", "10 March"),
    ("fix the staging server", "Tuesday"),
    ("book the workshop venue", "14 March"),
    ("update the onboarding guide", "end of month"),
    ("order new badges", "Monday"),
)


def orders(seed: int, count: int = 5) -> list[dict[str, object]]:
    """`count` made-up orders, the same for the same seed (ids, customers, cities, items and totals differ)."""
    found = []
    for i in range(count):
        name, city = PEOPLE[(seed + 3 * i) % len(PEOPLE)]
        items = [PRODUCTS[(seed * 5 + i * 3 + k) % len(PRODUCTS)] for k in range(1 + (seed + i) % 2)]
        found.append(
            {
                "id": f"B-{2000 + seed * 10 + i}",
                "customer": name,
                "city": city,
                "items": items,
                "total": round(12.5 + 7.3 * ((seed * 7 + i * 11) % 29), 2),
            }
        )
    return found


def _json_to_yaml(seed: int) -> str:
    made = orders(seed)
    lines = ",\n".join("  " + json.dumps(o) for o in made)
    first = made[0]
    return (
        f'orders.json:\n{{"orders": [\n{lines}\n]}}\n\nThe same orders as YAML (orders.yaml):\norders:\n'
        f"  - id: {first['id']}\n    customer: {first['customer']}\n"
    )


def _csv_to_json(seed: int) -> str:
    made = orders(seed)
    rows = "\n".join(f"{o['id']},{o['customer']},{o['city']},{o['total']:.2f}" for o in made)
    first = made[0]
    opening = json.dumps({k: first[k] for k in ("id", "customer", "city")})[:-1]
    return f"id,customer,city,total\n{rows}\n\nThe same rows as a JSON list:\n[\n  {opening}, "


def _notes_to_table(seed: int) -> str:
    people = [PEOPLE[(seed + k) % len(PEOPLE)][0].split()[0] for k in range(8)]
    tasks = [_TASKS[(seed + 5 * k) % len(_TASKS)] for k in range(8)]
    notes = "\n".join(
        f"- {who} will {task} by {due}." for who, (task, due) in zip(people, tasks, strict=True)
    )
    who, (task, due) = people[0], tasks[0]
    return (
        f"Meeting notes, {1 + seed % 27} March\n{notes}\n\nAction items as a table:\n"
        f"| owner | task | due |\n|-------|------|-----|\n| {who} | {task} | {due} |\n"
    )


def _invoice_to_json(seed: int) -> str:
    name, city = PEOPLE[seed % len(PEOPLE)]
    lines = []
    for k in range(5):
        product = PRODUCTS[(seed + 3 * k) % len(PRODUCTS)]
        quantity = 2 + (seed * 3 + k * 5) % 17
        price = round(4.5 + ((seed * 11 + k * 7) % 23) * 1.25, 2)
        lines.append(
            f"Line {k + 1}: {product}, quantity {quantity}, unit price {price:.2f} EUR, "
            f"amount {quantity * price:.2f} EUR"
        )
    return (
        f"Invoice 2024-{900 + seed:04d}\nSeller: Nordlicht Components GmbH, Hamburg, Germany\n"
        f"Buyer: {name}, {city}\nDate: 2024-09-{1 + seed % 28:02d}\n" + "\n".join(lines) + "\n\n"
        f'The invoice as JSON:\n{{\n  "number": "2024-{900 + seed:04d}",\n  "seller": "Nordlicht Components GmbH",\n'
    )


def _log_to_csv(seed: int) -> str:
    events = []
    for k in range(9):
        minute = (seed * 7 + k * 9) % 60
        user = PEOPLE[(seed + k) % len(PEOPLE)][0].split()[0].lower()
        status = (200, 200, 404, 200, 500, 200, 302)[(seed + k) % 7]
        path = ("/login", "/orders", "/cart", "/search", "/profile", "/help")[(seed * 3 + k) % 6]
        events.append(
            f"2024-05-{1 + seed % 28:02d} 14:{minute:02d}:{(k * 13) % 60:02d} {user} GET {path} {status}"
        )
    first = events[0].split()
    return (
        "access.log:\n"
        + "\n".join(events)
        + "\n\nThe same requests as CSV (date,time,user,method,path,status):\n"
        + ",".join(first)
        + "\n"
    )


_TOOL_FORMS = (_csv_to_json, _json_to_yaml, _notes_to_table, _invoice_to_json, _log_to_csv)
TOOL: list[str] = [_TOOL_FORMS[seed % len(_TOOL_FORMS)](seed) for seed in range(1, 37)]
