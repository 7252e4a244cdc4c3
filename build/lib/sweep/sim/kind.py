"""Which kind of answer a prompt asks for (`classify`): the simulated model's acceptance follows what the answer
will be, not how the prompt is worded.

- **tool**: the answer copies or restructures what the prompt holds (a document to repeat or quote, records to
  extract, a config to copy verbatim, rows to re-lay as a table, a tool call's arguments);
- **code**: the answer is code, in any language or framework (asked for, or the text the answer continues is
  code, or code in the prompt is to be changed);
- **prose**: anything else, in any human language (a story, an explanation, a summary, an explanation of code).

The prompt is read as a person reads a request: sentence by sentence, a request to produce code names a code
artifact or a programming language in the sentence that asks; a copy names what it copies. A chat prompt is its
message (after context filling's "Task:"); text to continue (a base model's prompt) is read at its end, since
context filling puts other text before the task: the last paragraphs, back over the data they end on (code,
records, a config) to the sentence that introduced it. Words are matched between ASCII letters only, so a
language name inside Chinese or Japanese text ("用Python写") is found.
"""

from __future__ import annotations

import re

from sweep.sim.text import PARAGRAPH, chat_content


def _words(*alternatives: str) -> str:
    """Alternatives matched as whole words among ASCII letters (CJK text around them is no word boundary)."""
    return r"(?<![A-Za-z0-9_])(?:" + "|".join(alternatives) + r")(?![A-Za-z0-9_])"


# Programming languages, query and markup languages, frameworks and tools whose files are code. Case-sensitive
# names that are also English words (Go, C, R) only where the sentence makes them a language.
LANGUAGE = re.compile(
    _words(
        r"python\d?",
        "rust",
        "typescript",
        "javascript",
        "js",
        "ts",
        "jsx",
        "tsx",
        "java",
        "kotlin",
        "swift",
        "golang",
        r"c\+\+",
        "cpp",
        "c#",
        "f#",
        "ruby",
        "php",
        "scala",
        "haskell",
        "elixir",
        "erlang",
        "clojure",
        "lua",
        "perl",
        "julia",
        "dart",
        "zig",
        "ocaml",
        "fortran",
        "cobol",
        "matlab",
        "sql",
        "postgres(?:ql)?",
        "mysql",
        "sqlite",
        "bash",
        "zsh",
        "powershell",
        "shell script",
        "html",
        "css",
        "scss",
        "react",
        "vue",
        "angular",
        "svelte",
        r"next\.?js",
        r"node\.?js",
        "deno",
        "django",
        "flask",
        "fastapi",
        "spring boot",
        "rails",
        "express",
        "jquery",
        "tailwind",
        "bootstrap",
        "unity",
        "pandas",
        "numpy",
        "pytorch",
        "tensorflow",
        "dockerfile",
        "makefile",
        "cmake",
        "terraform",
        "kubernetes",
        "graphql",
        "solidity",
        "assembly",
        "verilog",
        "vhdl",
        r"vb(?:\.net)?",
        "vba",
        "objective-c",
        "arduino",
        "regex",
        "github actions",
        "webpack",
        "tokio",
        "asyncio",
    ),
    re.I,
)
LANGUAGE_WORDS = re.compile(
    r"\b(?:in|using|with|a|an) (?:Go|C|R)\b|\b(?:Go|C|R) (?:program|function|code|struct)"
)
# What code is made of: the things a request to produce code names.
ARTIFACT = re.compile(
    _words(
        "code",
        "coding",
        "function",
        "functions",
        "method",
        "class",
        "struct",
        "enum",
        "trait",
        "interface",
        "module",
        "script (?:that|to|which)",
        "program",
        "snippet",
        "parser",
        "lexer",
        "tokenizer",
        "compiler",
        "interpreter",
        "lru cache",
        "hook",
        "component",
        "endpoint",
        "handler",
        "middleware",
        "decorator",
        "iterator",
        "generator",
        "callback",
        "api",
        "rest api",
        "cli",
        "command-line tool",
        "unit tests?",
        "test suite",
        "query",
        "trigger",
        "stored procedure",
        "migration",
        "data structure",
        "linked list",
        "binary (?:search )?tree",
        "hash ?map",
        "algorithm",
        "smart contract",
        "webapp",
        "web app",
        "app",
        "library",
        "implementation",
        "regular expression",
        "sql statement",
        "schema",
        "código",
        "función",
        "fonction",
        "funktion",
        "klasse",
    )
    + "|代码|函数|脚本|程序|コード|関数|クラス",
    re.I,
)
# A request to make something: with an artifact or a language in the same sentence, a request for code.
PRODUCE = re.compile(
    _words(
        "write",
        "implement",
        "create",
        "build",
        "make",
        "generate",
        "develop",
        "add",
        "fix",
        "debug",
        "refactor",
        "optimi[sz]e",
        "port",
        "complete",
        "finish",
        "define",
        "give me",
        "show me",
        "escribe",
        "implementa",
        "crea",
        "écris",
        "implémente",
        "schreibe",
        "implementiere",
        "erstelle",
    )
    + "|^\\s*code(?![A-Za-z0-9_])|写|编写|实现|生成|创建|書いて|実装",
    re.I,
)
# A question how to do something in a language: its answer shows the code.
HOW_TO = re.compile(r"\bhow (?:do|can|to|would|should|does)\b|\bis there\b|\bexample\b|怎么|如何", re.I)
# A request whose answer is new prose about the prompt (an explanation of code is prose).
EXPLAIN = re.compile(
    _words(
        "explain",
        "summari[sz]e",
        "summary",
        "describe",
        "analy[sz]e",
        "review",
        "what (?:is|does|are)",
        "why",
        "tell me",
        "discuss",
        "in short",
        "résume",
        "resume",
        "zusammen",
    )
    + "|总结|概括|摘要|解释|要約|説明",
    re.I,
)
# A request to copy what the prompt holds: a verb that copies (where the sentence asks), or a manner of
# writing that only a copy has (word for word, unchanged).
COPY_VERB = re.compile(
    _words("copy", "repeat", "reproduce", "echo", "transcribe", "quote", "copia", "copie", "kopiere")
    + "|复制|照抄|抄写|重复",
    re.I,
)
COPY_MANNER = re.compile(
    _words(
        "verbatim",
        "word for word",
        "unchanged",
        "as it was",
        "exactly as (?:it is|they are|written|given|shown)",
        "quoted (?:in full|exactly)",
        "the same (?:\\w+ ){0,3}(?:with|as|but)",
        "textualmente",
        "mot pour mot",
        "wörtlich",
    )
    + "|原样|逐字|そのまま",
    re.I,
)
SOURCE = re.compile(
    _words(
        "following",
        "below",
        "above",
        "this",
        "these",
        "that",
        "given",
        "the (?:\\w+ ){0,2}(?:text|passage|paragraph|section|document|message|email|article|record|records|json|"
        "yaml|file|config|configuration|list|table|data|function|code|poem|letter|lines?|receipt|invoice|ticket|"
        "transcript|log|report|notes|form|reviews?|items?|page|article|story|order|meeting|conversation|chat)",
        "the \\w+'s",
    )
    + "|以下|下面|上面",
    re.I,
)
# A request to pull records out of what the prompt holds, or to lay them out again; a tool call's arguments.
EXTRACT = re.compile(
    _words(
        "extract",
        "extraction",
        "pull out",
        "fill in",
        "parse (?:\\w+ ){0,4}into",
        "list (?:all|every|each)",
        "transcribe",
        "tool call",
        "function call",
        "arguments",
        "entities",
        "the fields",
        "(?:use|call) the \\w+ tool",
        "call (?:the )?\\w+_\\w+",
        "from (?:the|this) (?:text|passage|message|email|document|article|invoice|receipt|record|page)",
        "extrae",
        "extrais",
        "extrahiere",
    )
    + "|提取|抽取|抽出",
    re.I,
)
# A structured answer format: with something to restructure, an extraction.
FORMAT = re.compile(
    _words(
        "(?:as|to|into|in) (?:a |an )?(?:json|yaml|toml|csv|xml|table|markdown table|structured format)",
        "json (?:object|array|lines)",
        "structured",
        "key: ?value",
        "key-value",
    ),
    re.I,
)
# A base model's extraction prompt ends in the opening of a structured copy of the document above it.
EXTRACTION_OPENING = re.compile(r"\bas (?:a )?(?:json|yaml|csv|table)\b[^\n]*:\n?$", re.I)
# A line of code at the start of a line: what a base model's code prompt is made of.
CODE_LINE = re.compile(
    r"^\s*(?:def |class |import |from \S+ import |#include|package |use [\w:\\{}, ]+;|func |fn |pub |function |"
    r"const |let |var |export |public |private |static |CREATE TABLE|SELECT |#!/|for ?\(|for \w+(?:, ?\w+)* in |"
    r"while ?\(|while .*:$|if ?[(\[]|return (?!the |a |an )|[A-Z_]+=|@\w+|```)",
    re.M,
)
# A line of data (code, a record, a config entry, a table row) rather than a sentence.
DATA_LINE = re.compile(
    r"^\s*(?:[\[{}\]<|#@\"']|```|[\w.-]+\s*[:=]\s|\S.*[;{}()\[\]]$|\s{2,}\S|[A-Z_]+=)|^\s*[\w.-]+,[\w.-]+(?:,|$)"
)
# What a request opens on: a verb that says what to do (in a few languages), after a word of courtesy.
_TO_DO = (
    r"(?:please |kindly |now |then |also )?(?:write|implement|create|build|make|generate|give|show|list|extract|"
    r"copy|repeat|quote|summari[sz]e|explain|describe|translate|convert|rewrite|fix|refactor|add|return|output|"
    r"print|tell|suggest|compose|draft|answer|analy[sz]e|review|compare|fill|parse|transcribe|reproduce|format|"
    r"find|calculate|design|plan|code|call|use|present|provide|turn|put|reformat|restate|complete|continue|rename|"
    r"keep|change|modify|update|remove|delete|replace|insert|sort|split|merge|count|classify|label|identify|"
    r"select|pick|group|normalize|clean|validate|correct|proofread|edit|improve|shorten|expand|simplify|"
    r"paraphrase|respond|reply|act|pretend|imagine|name|map|debug|optimi[sz]e|port|recite|echo|escribe|écris|"
    r"read|schreibe|extrae|extrais|copia|copie|kopiere|resume|résume)\b|(?:请|用|写|编写|提取|复制|总结|把)"
)
IMPERATIVE = re.compile(r"\s*" + _TO_DO, re.I)
# A request's reader, asked: its sentence asks whatever its verb.
TO_READER = re.compile(
    r"\b(?:can|could|would|will) you\b|\bi (?:want|need|would like|'d like)\b|\bhelp me\b", re.I
)
# A paragraph that asks: an imperative (a line's or a sentence's first words), a question to the reader, a line
# that introduces what follows.
ASKS = re.compile(r"(?:^|[.!?]\s+)\s*" + _TO_DO + "|" + TO_READER.pattern + r"|[?？:：]\s*$", re.I | re.M)
# A Markdown heading (a document's structure, not data); a code comment reads the same but sits among code.
HEADING = re.compile(r"^#{1,6} [A-Z][\w ,'-]*$")
# A sentence and the data it leads into, on one line: words before a colon, then a line of code.
LEAD = re.compile(r"^(\s*[A-Za-z][\w'-]*(?: [\w'.-]+){2,}:)\s+(\S.*[;{}()\[\]]\s*)$")
# A line of records: a JSON member, a table row, a key and its value, comma-separated values, an XML element.
RECORD_LINE = re.compile(
    r'^\s*(?:[\[{,]*\s*"[^"]*"\s*:|- \S|[\w.-]+:\s*$|\|.*\|\s*$|[\w .-]+:\s+\S|[\w.-]+\s*=\s*\S|\[[\w .-]+\]\s*$|'
    r"[^,\n(){};]+(?:,[^,\n(){};]+){2,}$|<\w+[^>]*>[^<]*</\w+>)"
)
SENTENCE = re.compile(r"(?<=[.!?。！？])\s+|\n+")
# A name or a title in quotes, or code in backticks: what it says is not asked.
QUOTED = re.compile(r'"[^"\n]{1,200}"|“[^”\n]{1,200}”|`[^`\n]{1,200}`')
# A request for a summary: new prose, whatever the text it sums up is about.
SUMMARY = re.compile(r"\s*(?:please )?(?:summari[sz]e|sum up|in short|tl;?dr|总结|概括|要約)", re.I)
KINDS_FIRST = ("tool", "code", "prose")  # when sentences ask for several kinds, the one that decides
# A paragraph that points at what follows.
FORWARD = re.compile(r"\b(?:below|following)\b|[:：]\s*$|以下|下面")
ASK_REACH = 2  # paragraphs before a document where text to continue may hold its request
# A last paragraph this short is an answer's opening (a quote's first words): the request is before it.
OPENING_WORDS = 12
UNFINISHED = re.compile(r"[,;]\s*$")  # a clause that goes on


def classify(prompt: str, instruction: bool = True) -> str:
    """Which workload a prompt is, from its text: "tool", "code" or "prose". `instruction`: a chat prompt
    (rendered by the simulated model's template), else text sent as it is, to be continued: there what the
    answer continues (code, records, a structured copy's opening) decides, unless the text asks for a copy."""
    if instruction:
        request = _message(prompt)
        return _asked(request) or _continued(request) or "prose"
    request, end = _tail(prompt)
    asked = _asked(request)
    return "tool" if asked == "tool" else _continued(end) or asked or "prose"


def _message(prompt: str) -> str:
    """A chat prompt's message, after context filling's material."""
    return chat_content(prompt).rsplit("Task:", 1)[-1]


def _tail(prompt: str) -> tuple[str, str]:
    """Text to continue: its last paragraph (what the answer continues) and the request read with it: the
    paragraphs before it where it is data or an answer's opening, back to the paragraph that introduced them,
    and further back to an instruction about what follows it (before its document) within `ASK_REACH`."""
    blocks = [b for b in PARAGRAPH.split(prompt) if b.strip()]
    if not blocks:
        return "", ""
    # A short last paragraph is an answer's opening unless it asks; one cut mid-clause (at a comma) is an
    # opening even where its first word is a verb ("Edit `space.yaml`: `model` is your target,").
    last = blocks[-1]
    opening = len(last.split()) <= OPENING_WORDS and (not ASKS.search(last) or bool(UNFINISHED.search(last)))
    taken = 2 if opening and len(blocks) > 1 else 1
    while taken < len(blocks) and _is_data(blocks[-taken]):
        taken += 1
    reach = min(len(blocks), taken + ASK_REACH)
    if not any(ASKS.search(b) for b in blocks[-taken:]):
        taken = next((n for n in range(taken + 1, reach + 1) if _introduces(blocks[-n])), taken)
    # An answer's opening is what the answer continues, not what was asked: its words ("Edit the file: ...")
    # are the document's, so the request is read from the paragraphs before it.
    asking = blocks[-taken:-1] if opening and taken > 1 else blocks[-taken:]
    return "\n\n".join(asking), blocks[-1]


def _introduces(block: str) -> bool:
    """Whether a paragraph asks for something done to what follows it (an instruction before its document)."""
    return bool(ASKS.search(block) and FORWARD.search(block))


def _data_lines(text: str) -> list[tuple[bool, str]]:
    """Each non-empty line and whether it is data (code, a record, a config entry, a table row): every line in
    a fenced block is, a heading or a sentence is not; a sentence that leads into data on its line ("Fix this:
    for (...)") is read apart from it."""
    out: list[tuple[bool, str]] = []
    fenced = False
    for whole in text.splitlines():
        lead = LEAD.match(whole)
        for line in (lead.group(1), lead.group(2)) if lead else (whole,):
            fence = line.lstrip().startswith("```")
            if line.strip():
                data = fence or fenced or bool(DATA_LINE.match(line) or CODE_LINE.match(line))
                out.append((data and not HEADING.match(line), line))
            fenced ^= fence
    return out


def _is_data(block: str) -> bool:
    lines = _data_lines(block)
    return bool(lines) and sum(data for data, _ in lines) * 2 >= len(lines)


def _prose_paragraphs(text: str) -> list[str]:
    """Runs of prose lines, parted by blank lines and by data."""
    paragraphs: list[str] = []
    run: list[str] = []
    for block in PARAGRAPH.split(text):
        for data, line in _data_lines(block):
            if data and run:
                paragraphs.append("\n".join(run))
                run = []
            elif not data:
                run.append(line)
        if run:
            paragraphs.append("\n".join(run))
            run = []
    return paragraphs


def _request_sentences(text: str) -> list[str]:
    """The sentences of the request, its names and quoted titles left out: the paragraphs that open on what to
    do (or ask the reader), else the last that asks or introduces what follows (a question, a colon), else the
    first and the last. Data (code, records) is never read, so that the words of a document to work on are not
    taken for the request."""
    paragraphs = _prose_paragraphs(text)
    asking = [p for p in paragraphs if IMPERATIVE.match(p) or TO_READER.search(p)]
    asking = asking or [p for p in paragraphs if ASKS.search(p)][-1:] or paragraphs[:1] + paragraphs[1:][-1:]
    return [s for p in asking for s in SENTENCE.split(QUOTED.sub('""', p)) if s.strip()]


def _sentence_kind(sentence: str) -> str | None:
    """What one sentence asks for, where it says: a copy or an extraction, code, an explanation."""
    if SUMMARY.match(sentence):
        return "prose"
    if COPY_MANNER.search(sentence) or (COPY_VERB.search(sentence) and ASKS.search(sentence)):
        return "tool"
    if EXTRACT.search(sentence):
        return "tool"
    if _asks_code(sentence):
        return "code"
    if EXPLAIN.search(sentence):
        return "prose"
    return "tool" if FORMAT.search(sentence) and SOURCE.search(sentence) else None


def _asked(request: str) -> str | None:
    """The kind a request names: a copy or an extraction before code, code before an explanation (the most
    particular thing asked decides); else what the code it holds is for, else an answer in a structured format
    of what it holds."""
    sentences = _request_sentences(request)
    kinds = {_sentence_kind(s) for s in sentences}
    kind = next((k for k in KINDS_FIRST if k in kinds), None)
    if kind is not None:
        return kind
    if _holds_code(request):
        return "code"
    if len(sentences) > 1 and any(FORMAT.search(s) for s in sentences):
        return "tool"
    return "tool" if request.count("{") >= 3 else None


def _asks_code(sentence: str) -> bool:
    language = bool(LANGUAGE.search(sentence) or LANGUAGE_WORDS.search(sentence))
    artifact = bool(ARTIFACT.search(sentence))
    if PRODUCE.search(sentence):
        return language or artifact
    return language and (artifact or bool(HOW_TO.search(sentence)))


def _holds_code(text: str) -> bool:
    return "```" in text or len(CODE_LINE.findall(text)) >= 2


def _continued(end: str) -> str | None:
    """The kind of text the answer continues: the opening of a structured copy, code, or records."""
    if EXTRACTION_OPENING.search(end):
        return "tool"
    lines = [line for data, line in _data_lines(end) if data and not line.lstrip().startswith("```")]
    if not _is_data(end) or not lines:
        return None
    records = sum(bool(RECORD_LINE.match(line)) for line in lines)
    return "tool" if records * 2 > len(lines) and not CODE_LINE.search(end) else "code"
