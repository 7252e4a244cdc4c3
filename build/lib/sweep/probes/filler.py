"""Context filling: real, non-repeating text put before a task so a prompt reaches a target length in tokens.

The text is the documentation of Python's own standard library (module, class and function docstrings):
real English prose and examples, present on every machine that runs specsweep, and long enough for 128K-token
prompts without repeating. Each request takes a different slice, so no two measured prompts share a filler.
Lengths are counted with the engine's own tokenizer.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import warnings
from collections.abc import Awaitable, Callable

from sweep.engines.values import PromptForm

# The modules whose docstrings make the corpus, in the order their text is laid out (repeats kept).
_MODULE_NAMES = """
    argparse asyncio collections concurrent.futures contextlib csv dataclasses datetime decimal difflib
    email enum fractions ftplib functools gzip hashlib heapq html http.client http.server imaplib importlib
    inspect ipaddress itertools json logging mailbox multiprocessing os pathlib pickle pdb platform poplib
    pprint queue random re sched secrets selectors shutil signal smtplib socket sqlite3 statistics string
    struct subprocess tarfile tempfile textwrap threading timeit tokenize traceback typing unittest
    urllib.parse urllib.request uuid wave weakref xml.dom.minidom xml.etree.ElementTree zipfile zoneinfo abc
    ast base64 bdb binascii bisect bz2 calendar cmath cmd code codecs colorsys configparser contextvars copy
    ctypes dbm dis doctest email.message email.utils filecmp fileinput fnmatch ftplib getopt gettext glob
    graphlib hmac html.parser http.cookiejar http.cookies imaplib io json.decoder locale lzma math mimetypes
    numbers operator optparse os.path pickletools pkgutil plistlib pstats pydoc quopri reprlib runpy shelve
    shlex site smtplib socketserver ssl stat string symtable sysconfig tabnanny telnetlib test.support token
    tomllib trace tracemalloc types unittest.mock urllib.error urllib.robotparser uu venv warnings
    wsgiref.simple_server xml.sax xmlrpc.client xmlrpc.server zipapp zipimport zlib
"""
CORPUS_MODULES = tuple(_MODULE_NAMES.split())
PREAMBLE = "Reference material (background only; the task follows after it):\n\n"
TOLERANCE_TOKENS = 16
MAX_ROUNDS = 5

CountTokens = Callable[[str], Awaitable[int]]


@functools.cache
def corpus() -> str:
    """Unique paragraphs of the standard library's documentation, in a fixed order."""
    seen: set[str] = set()
    paragraphs: list[str] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in CORPUS_MODULES:
            try:
                module = importlib.import_module(name)
            except ImportError:
                continue
            members = [obj for _, obj in sorted(vars(module).items()) if callable(obj)]
            methods = [
                m
                for cls in members
                if isinstance(cls, type)
                for _, m in sorted(vars(cls).items())
                if callable(m)
            ]
            for obj in (module, *members, *methods):
                doc = inspect.getdoc(obj) or ""
                for paragraph in doc.split("\n\n"):
                    paragraph = paragraph.strip()
                    if len(paragraph) > 40 and paragraph not in seen:
                        seen.add(paragraph)
                        paragraphs.append(paragraph)
    return "\n\n".join(paragraphs)


def filler_slice(start: int, length: int) -> str:
    """`length` characters of the corpus from `start`, wrapping around."""
    text = corpus()
    start %= len(text)
    out = text[start : start + length]
    while len(out) < length:
        out += "\n\n" + text[: length - len(out)]
    return out


def compose(filler: str, task: str, form: PromptForm = PromptForm.CHAT) -> str:
    """An instruction after its reference material (chat), or a document after earlier text (completion: a base
    model reads it as one document and continues its end)."""
    if form is PromptForm.COMPLETION:
        return f"{filler}\n\n{task}"
    return f"{PREAMBLE}{filler}\n\nTask: {task}"


async def fill_to(
    target_tokens: int,
    task: str,
    slot: int,
    count_tokens: CountTokens,
    form: PromptForm = PromptForm.CHAT,
) -> tuple[str, int]:
    """A prompt of about `target_tokens` tokens: corpus slice number `slot`, then the task.

    Returns the prompt and its token count. The slice is sized by the measured characters per token and
    corrected until it is within TOLERANCE_TOKENS (or MAX_ROUNDS corrections were made).
    """
    fixed_tokens = await count_tokens(compose("", task, form))
    chars = max(1, (target_tokens - fixed_tokens) * 4)
    start = slot * chars  # consecutive slots take consecutive slices: no two requests share filler text
    prompt, tokens = task, fixed_tokens
    for _ in range(MAX_ROUNDS):
        prompt = compose(filler_slice(start, chars), task, form)
        tokens = await count_tokens(prompt)
        missing = target_tokens - tokens
        if abs(missing) <= TOLERANCE_TOKENS:
            break
        per_token = chars / max(1, tokens - fixed_tokens)
        chars = max(1, int(chars + missing * per_token))
    return prompt, tokens
