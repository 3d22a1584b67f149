#!/usr/bin/python3
"""DeerFlow's deferred-tool search, as DeerFlow runs it (docs/deerflow.md §2.3,
§2.4): the baseline of the tool_search figures of bench/e2e.

Stdlib only (run with /usr/bin/python3). Reads a static tool file (JSONL, the
format of testdata/mcp-catalog/*/tools.jsonl) and a JSON list of queries, runs
every query `reps` times over the whole catalog in catalog order, and renders
each result like DeerFlow's tool_search (the matched tools' OpenAI function
schemas as a JSON array, indent 2, non-ASCII kept). Prints one JSON object:
per-call latencies' p50 and p99 in microseconds and the hit count per query.

usage: deerflow_search.py TOOLS.jsonl QUERIES.json REPS
"""
import json
import re
import sys
import time

MAX_RESULTS = 5


class Entry:
    __slots__ = ("name", "description", "parameters")

    def __init__(self, row):
        self.name = row["name"]
        self.description = row.get("description") or ""
        self.parameters = row.get("input_schema") or {"type": "object", "properties": {}}


def _compile(pattern):
    try:
        return re.compile(pattern, re.IGNORECASE)
    except re.error:
        return re.compile(re.escape(pattern), re.IGNORECASE)


def _regex_score(regex, entry):
    return len(regex.findall(f"{entry.name} {entry.description}"))


def search(entries, query):
    """DeerFlow's DeferredToolRegistry.search: select:, +required, regex."""
    query = query.strip()
    if not query:
        return []
    if query.startswith("select:"):
        names = {n.strip() for n in query[len("select:"):].split(",")}
        return [e for e in entries if e.name in names]
    if query.startswith("+"):
        parts = query[1:].split(None, 1)
        if not parts:
            return []
        required = parts[0].lower()
        candidates = [e for e in entries if required in e.name.lower()]
        if len(parts) > 1:
            regex = _compile(parts[1])
            candidates.sort(key=lambda e: _regex_score(regex, e), reverse=True)
        return candidates[:MAX_RESULTS]
    regex = _compile(query)
    scored = []
    for e in entries:
        if regex.search(f"{e.name} {e.description}"):
            scored.append((2 if regex.search(e.name) else 1, e))
    scored.sort(key=lambda x: x[0], reverse=True)
    return [e for _, e in scored[:MAX_RESULTS]]


def tool_search(entries, query):
    """The tool_search tool's message content (docs/deerflow.md §2.4)."""
    hits = search(entries, query)
    if not hits:
        return "No tools found matching: " + query, 0
    schemas = [{"name": e.name, "description": e.description, "parameters": e.parameters} for e in hits]
    return json.dumps(schemas, indent=2, ensure_ascii=False), len(hits)


def main():
    tools_path, queries_path, reps = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with open(tools_path, encoding="utf-8") as f:
        entries = [Entry(json.loads(line)) for line in f if line.strip()]
    with open(queries_path, encoding="utf-8") as f:
        queries = json.load(f)
    lat = []
    hits = {}
    for _ in range(reps):
        for q in queries:
            t0 = time.perf_counter_ns()
            _, n = tool_search(entries, q)
            lat.append(time.perf_counter_ns() - t0)
            hits[q] = n
    lat.sort()
    pick = lambda p: lat[min(int(len(lat) * p), len(lat) - 1)] / 1000.0
    print(json.dumps({"tools": len(entries), "calls": len(lat), "p50_us": pick(0.5), "p99_us": pick(0.99), "hits": hits}))


if __name__ == "__main__":
    main()
