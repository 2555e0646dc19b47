"""Live tests of `candle serve` through the official openai client.

Usage: test_openai.py BASE_URL API_KEY [SMALL_BASE_URL]
BASE_URL serves a model with --api-key API_KEY, a chat template and a
256-token context; SMALL_BASE_URL (optional) a server with one slot and a
one-request queue, for the 429 test. SERVER_TESTS (optional, comma
separated) runs only the named tests. CANDLE_BIN and CANDLE_MODEL (optional:
the binary and the served model) let test_logprobs compare with
`candle logits`."""
import os
import http.client
import json
import math
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.parse

import openai

BASE, KEY = sys.argv[1], sys.argv[2]
SMALL = sys.argv[3] if len(sys.argv) > 3 else None
U = urllib.parse.urlparse(BASE)
client = openai.OpenAI(base_url=BASE + "/v1", api_key=KEY, max_retries=0, timeout=60)
MODEL = client.models.list().data[0].id
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, flush=True)


def raw(method, path, body=None, headers=None, host=U.hostname, port=U.port, key=KEY):
    c = http.client.HTTPConnection(host, port, timeout=60)
    h = {"Content-Type": "application/json"}
    if key:
        h["Authorization"] = "Bearer " + key
    h.update(headers or {})
    c.request(method, path, body=body, headers=h)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def error_of(status, data):
    """The (status, error object) of an OpenAI-shaped error reply."""
    try:
        e = json.loads(data)["error"]
        assert isinstance(e["message"], str) and e["message"] and "type" in e
        return status, e
    except Exception:
        return status, None


PROMPTS = ["Once upon a time", "The little dog", "Tom and Lily went to", "One day, a bird",
           "The sun was", "Mia had a red", "There was a big", "The cat said",
           "A boy named Tim", "In the park", "The girl wanted", "Sam liked to",
           "The old tree", "They played with", "Lily saw a", "Ben was sad because",
           "The car was", "Anna found a"]


def greedy(prompt, n=24):
    r = client.completions.create(model=MODEL, prompt=prompt, max_tokens=n, temperature=0)
    return r.choices[0].text


def stream_text(prompt, n=24, chat=False):
    out, finish = [], None
    if chat:
        s = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": prompt}],
                                           max_tokens=n, temperature=0, stream=True)
        for ch in s:
            if ch.choices:
                out.append(ch.choices[0].delta.content or "")
                finish = ch.choices[0].finish_reason or finish
    else:
        s = client.completions.create(model=MODEL, prompt=prompt, max_tokens=n, temperature=0,
                                      stream=True)
        for ch in s:
            if ch.choices:
                out.append(ch.choices[0].text)
                finish = ch.choices[0].finish_reason or finish
    return "".join(out), finish


def test_basic():
    r = client.completions.create(model=MODEL, prompt="Once upon a time", max_tokens=16, temperature=0)
    c = r.choices[0]
    check(len(c.text) > 0, "completion text")
    check(c.finish_reason == "length", f"finish_reason length, got {c.finish_reason}")
    check(r.usage.completion_tokens == 16 and r.usage.prompt_tokens > 0 and
          r.usage.total_tokens == r.usage.prompt_tokens + 16, f"usage {r.usage}")
    check(greedy("Once upon a time", 16) == c.text, "greedy is deterministic")
    # sampling: same seed, same text; the samplers' options are accepted
    kw = dict(model=MODEL, prompt="The little dog", max_tokens=20, temperature=1.0, top_p=0.9,
              seed=1234, frequency_penalty=0.5, presence_penalty=0.5,
              extra_body={"top_k": 40, "min_p": 0.05, "repeat_penalty": 1.1})
    a = client.completions.create(**kw).choices[0].text
    b = client.completions.create(**kw).choices[0].text
    check(a == b, "seeded sampling reproducible")
    # stop sequences: the text ends before the first occurrence
    full = greedy("Once upon a time", 40)
    word = full.split()[3] if len(full.split()) > 3 else None
    if word:
        r = client.completions.create(model=MODEL, prompt="Once upon a time", max_tokens=40,
                                      temperature=0, stop=[word, "zzzz"])
        check(r.choices[0].finish_reason == "stop", "stop finish_reason")
        check(r.choices[0].text == full[:full.index(word)], f"stop text {r.choices[0].text!r}")
    # a repeated long prompt shares the published KV blocks of its prefix
    long = "Once upon a time there was a little girl named Lily who liked to play in the park with her dog"
    r1 = client.completions.create(model=MODEL, prompt=long, max_tokens=12, temperature=0)
    r2 = client.completions.create(model=MODEL, prompt=long, max_tokens=12, temperature=0)
    cached = r2.usage.prompt_tokens_details.cached_tokens
    # all but the last token: whole blocks shared, the partly filled one's rows copied
    check(cached == r2.usage.prompt_tokens - 1,
          f"prefix cache: {cached} of {r2.usage.prompt_tokens} prompt tokens cached")
    check(r1.choices[0].text == r2.choices[0].text, "prefix-cached output equals uncached")
    # token-id prompts
    r = client.completions.create(model=MODEL, prompt=[1, 20, 30], max_tokens=4, temperature=0)
    check(r.usage.prompt_tokens == 3, "token-id prompt")
    # ids are unique and look random, as OpenAI's do; what the server does anyway passes
    ids = [client.completions.create(model=MODEL, prompt="x", max_tokens=1, temperature=0,
                                     logprobs=None, extra_body={"logit_bias": {}}).id for _ in range(3)]
    check(len(set(ids)) == 3 and all(re.fullmatch(r"cmpl-[0-9a-f]{24}", i) for i in ids), f"ids {ids}")
    r = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=1,
                                       response_format={"type": "text"}, tool_choice="none")
    check(re.fullmatch(r"chatcmpl-[0-9a-f]{24}", r.id) is not None, f"chat id {r.id}")


def test_response_format():
    """response_format is enforced: the reply is JSON of the schema."""
    schema = {"type": "object", "properties": {"answer": {"enum": ["yes", "no"]}, "n": {"type": "integer"}},
              "required": ["answer", "n"]}
    fmt = {"type": "json_schema", "json_schema": {"name": "a", "schema": schema}}
    for chat in (False, True):
        if chat:
            r = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Once upon a time"}],
                                               max_tokens=80, temperature=0, response_format=fmt)
            text, fin = r.choices[0].message.content, r.choices[0].finish_reason
        else:
            r = client.completions.create(model=MODEL, prompt="Once upon a time", max_tokens=80, temperature=0,
                                          extra_body={"response_format": fmt})
            text, fin = r.choices[0].text, r.choices[0].finish_reason
        ok = False
        try:
            v = json.loads(text)
            ok = v.get("answer") in ("yes", "no") and isinstance(v.get("n"), int) and set(v) == {"answer", "n"}
        except ValueError:
            pass
        check(fin == "stop" and ok, f"response_format json_schema ({'chat' if chat else 'completion'}): "
                                    f"{fin} {text!r}")
    r = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=60,
                                       temperature=0, response_format={"type": "json_object"})
    text = r.choices[0].message.content
    if r.choices[0].finish_reason == "stop":
        check(isinstance(json.loads(text), dict), f"json_object: {text!r}")
    else:
        check(text.startswith("{"), f"json_object (cut at the limit): {text!r}")


TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Get the current weather of a city",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "the city's name"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city", "unit"]}}},
    {"type": "function", "function": {
        "name": "add", "description": "Add two integers",
        "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                       "required": ["a", "b"]}}},
]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
try:
    import jsonschema
except ImportError:  # field checks instead
    jsonschema = None


def args_valid(name, arguments):
    """Do a call's arguments (a JSON string) parse and follow its function's schema?"""
    try:
        v = json.loads(arguments)
    except (TypeError, ValueError):
        return False
    sch = SCHEMAS.get(name)
    if sch is None or not isinstance(v, dict):
        return False
    if jsonschema:
        try:
            jsonschema.validate(v, sch)
            return True
        except jsonschema.ValidationError:
            return False
    types = {"string": str, "integer": int}
    for k, p in sch["properties"].items():
        if k in v and (not isinstance(v[k], types[p["type"]]) or isinstance(v[k], bool) or
                       ("enum" in p and v[k] not in p["enum"])):
            return False
    return set(sch["required"]) <= set(v) <= set(sch["properties"])


def calls_of(message):
    return [(c.function.name, c.function.arguments) for c in (message.tool_calls or [])]


def stream_calls(**kw):
    """A streamed request's calls reassembled from their deltas, and its finish."""
    calls, finish, content = {}, None, []
    for ch in client.chat.completions.create(stream=True, **kw):
        if not ch.choices:
            continue
        d = ch.choices[0].delta
        finish = ch.choices[0].finish_reason or finish
        content.append(d.content or "")
        for tc in d.tool_calls or []:
            if tc.index not in calls:
                # the first delta of a call: index, id, type, name and empty arguments
                check(tc.id and tc.type == "function" and tc.function.name and tc.function.arguments == "",
                      f"first tool_calls delta {tc}")
                calls[tc.index] = [tc.id, tc.function.name, ""]
            else:
                check(tc.id is None and tc.function.name is None, f"later tool_calls delta {tc}")
            calls[tc.index][2] += tc.function.arguments or ""
    return [(n, a) for _, (i, n, a) in sorted(calls.items())], [i for i, _, _ in calls.values()], finish, \
        "".join(content)


def test_tools():
    """Tool calls: tool_choice required and named give calls whose arguments follow
    the schema, streamed deltas reassemble to the same calls, and the calls and
    their results go back into the conversation."""
    user = [{"role": "user", "content": "What is the weather in Paris, in celsius?"}]
    named = {"type": "function", "function": {"name": "add"}}
    for choice, want in (("required", None), ({"type": "function", "function": {"name": "get_weather"}},
                                               "get_weather"), (named, "add")):
        kw = dict(model=MODEL, messages=user if want != "add" else
                  [{"role": "user", "content": "What is 2 plus 3?"}], tools=TOOLS, tool_choice=choice,
                  temperature=0, max_tokens=120)
        r = client.chat.completions.create(**kw)
        c = r.choices[0]
        calls = calls_of(c.message)
        what = f"tool_choice {choice}: {c.finish_reason} {c.message}"
        check(c.finish_reason == "tool_calls" and calls and c.message.content is None, what)
        check(all(args_valid(n, a) for n, a in calls) and (want is None or all(n == want for n, _ in calls)),
              "arguments follow the schema, " + what)
        ids = [t.id for t in c.message.tool_calls or []]
        check(len(set(ids)) == len(ids) and all(re.fullmatch(r"call_[0-9a-f]{24}", i) for i in ids) and
              all(t.type == "function" for t in c.message.tool_calls or []), f"call ids {ids}")
        s_calls, _, s_ids, s_fin, s_text = assemble_stream(trace=True, **kw)
        check(s_calls == calls and s_fin == "tool_calls" and not s_text.strip(),
              f"streamed calls {s_calls} {s_fin} {s_text!r} == {calls}")
        check(not set(s_ids) & set(ids), "streamed call ids are new")
        if not calls:
            continue
        # the calls and their results back in the conversation: accepted and answered
        follow = kw["messages"] + [
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": t.id, "type": "function", "function": {"name": t.function.name,
                                                              "arguments": t.function.arguments}}
                for t in c.message.tool_calls]}] + [
            {"role": "tool", "tool_call_id": t.id, "content": json.dumps({"result": 18 if want != "add" else 5})}
            for t in c.message.tool_calls]
        r2 = client.chat.completions.create(model=MODEL, messages=follow, tools=TOOLS, temperature=0,
                                            max_tokens=40)
        c2 = r2.choices[0]
        check(c2.finish_reason in ("stop", "length", "tool_calls") and (c2.message.content or c2.message.tool_calls),
              f"follow-up after the tool results: {c2.finish_reason} {c2.message}")
        r3 = client.chat.completions.create(model=MODEL, messages=follow, tools=TOOLS, tool_choice="none",
                                            temperature=0, max_tokens=20)
        check(r3.choices[0].message.tool_calls is None and r3.choices[0].finish_reason in ("stop", "length"),
              f"tool_choice none: {r3.choices[0]}")
    # tool_choice auto: free text or calls, streamed as the whole reply
    kw = dict(model=MODEL, messages=[{"role": "user", "content": "Say hello to Ann."}], tools=TOOLS,
              temperature=0, max_tokens=30)
    c = client.chat.completions.create(**kw).choices[0]
    s_calls, _, s_fin, s_text = stream_calls(**kw)
    if c.message.tool_calls:
        check(s_calls == calls_of(c.message) and s_fin == "tool_calls", f"auto, streamed {s_calls} {calls_of(c.message)}")
    else:
        check(s_text == c.message.content and s_fin == c.finish_reason, f"auto, streamed {s_text!r} {c.message}")
    # tool_choice auto under sampling: the grammar holds a call from its opening on,
    # so every call the model chooses to make follows its schema
    made = 0
    for i in range(int(os.environ.get("TOOL_REQUESTS", "12")) // 2):
        c = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": [
            "What is the weather in Oslo?", "Add 40 and 2 with the tool.", "Weather in Lima, fahrenheit?"][i % 3]}],
            tools=TOOLS, temperature=0.8, seed=100 + i, max_tokens=120).choices[0]
        calls = calls_of(c.message)
        made += len(calls)
        check(all(args_valid(n, a) for n, a in calls) and (not calls or c.finish_reason == "tool_calls"),
              f"auto, sampled, seed {100 + i}: {c.finish_reason} {c.message}")
    print(f"tool_choice auto: {made} calls made, all valid")
    # one call only when parallel_tool_calls is false
    r = client.chat.completions.create(model=MODEL, messages=user, tools=TOOLS, tool_choice="required",
                                       parallel_tool_calls=False, temperature=0, max_tokens=120)
    check(len(r.choices[0].message.tool_calls or []) == 1, f"parallel_tool_calls false: {r.choices[0].message}")
    # validity under sampling: every required call parses and follows its schema
    n = int(os.environ.get("TOOL_REQUESTS", "12"))
    prompts = ["Weather in Oslo?", "Add 40 and 2.", "Is it raining in Lima? Use fahrenheit.", "What is 7 + 8?",
               "Tell me the weather of Tokyo.", "Sum 100 and -3."]
    good = total = 0
    for i in range(n):
        r = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": prompts[i % 6]}],
                                           tools=TOOLS, tool_choice="required", temperature=0.8, seed=i,
                                           max_tokens=120)
        calls = calls_of(r.choices[0].message)
        total += 1
        good += bool(calls) and all(args_valid(nm, a) for nm, a in calls)
    print(f"tool calls valid: {good}/{total} (tool_choice required, temperature 0.8)", flush=True)
    check(good == total, f"tool-call validity {good}/{total}")


def args_so_far(text, end=False):
    """The calls opened in a reply's bytes so far that a grammar wrote (each
    `"arguments": {` or `"parameters": {`), and the last one's arguments as
    the server gives them: whitespace outside strings left out, up to the end
    of the object or of the text, whole UTF-8 characters (at the end, a
    character cut off by max_tokens is U+FFFD, as the server writes it)."""
    opened = [m.end() - 1 for m in re.finditer(rb'"(?:arguments|parameters)": \{', text)]
    if not opened:
        return 0, ""
    out, depth, in_str, esc = bytearray(), 0, False, False
    for c in text[opened[-1]:]:
        if in_str:
            out.append(c)
            esc, in_str = (False, True) if esc else (c == 0x5C, c != 0x22)
            continue
        if c in b" \n\t\r":
            continue
        out.append(c)
        in_str = c == 0x22
        depth += (c in b"{[") - (c in b"}]")
        if depth == 0:
            break
    if end:
        return len(opened), bytes(out).decode(errors="replace")
    for k in range(4):  # an incomplete character at the end stays back
        try:
            return len(opened), bytes(out[:len(out) - k]).decode()
        except UnicodeDecodeError:
            pass
    return len(opened), None


def assemble_stream(trace=False, **kw):
    """A streamed request's tool calls put together as openai's docs show
    (the first delta of an index kept, the later ones' arguments appended),
    with what the deltas must be: a call's first carries its index, id, type
    and name with arguments "", the later ones only arguments, calls come in
    index order. With trace (a reply the grammar writes) the stream also
    carries logprobs, whose tokens tell the reply's bytes at each chunk: after
    each chunk the calls given out must be the calls opened so far, the last
    one's arguments all that has been generated of them (deltas come as the
    model writes, not at the end). Returns the calls (name, arguments) by
    index, each call's number of argument fragments, the ids, the finish
    reason and the content."""
    final_tool_calls, fragments, finish, content, order = {}, {}, None, [], []
    text, chunks, lagged = bytearray(), 0, []

    def caught_up(end=False):
        n, args = args_so_far(bytes(text), end)
        if n and (len(final_tool_calls) != (n if kw.get("parallel_tool_calls", True) else 1) or
                  final_tool_calls[len(final_tool_calls) - 1].function.arguments != args):
            lagged.append((n, args, {i: t.function.arguments for i, t in final_tool_calls.items()}))

    for chunk in client.chat.completions.create(stream=True, **(dict(kw, logprobs=True) if trace else kw)):
        if not chunk.choices:
            continue
        lp = chunk.choices[0].logprobs
        if trace and lp and lp.content:  # a new chunk of generated text
            caught_up()
            text += b"".join(bytes(e.bytes) for e in lp.content)
            chunks += 1
        delta = chunk.choices[0].delta
        finish = chunk.choices[0].finish_reason or finish
        content.append(delta.content or "")
        for tool_call in delta.tool_calls or []:
            index = tool_call.index
            if index not in final_tool_calls:
                check(re.fullmatch(r"call_[0-9a-f]{24}", tool_call.id or "") and tool_call.type == "function" and
                      tool_call.function.name and tool_call.function.arguments == "",
                      f"first tool_calls delta {tool_call}")
                check(index == len(final_tool_calls) and (not order or order[-1] == index - 1),
                      f"call {index} opens after calls {order}: index order")
                final_tool_calls[index] = tool_call
                fragments[index] = 0
            else:
                check(tool_call.id is None and tool_call.function.name is None and tool_call.function.arguments and
                      order[-1] == index, f"later tool_calls delta {tool_call} after calls {order}")
                final_tool_calls[index].function.arguments += tool_call.function.arguments
                fragments[index] += 1
            order.append(index)
    if trace:
        caught_up(True)
        check(not lagged, f"{kw.get('tool_choice')}: tool_calls deltas behind the generated text "
                          f"(calls opened, arguments so far, given out): {lagged[:2]}")
        check(chunks > 0, "a traced stream carried logprobs")
    calls = [(t.function.name, t.function.arguments) for _, t in sorted(final_tool_calls.items())]
    return calls, [fragments[i] for i in sorted(fragments)], [t.id for t in final_tool_calls.values()], finish, \
        "".join(content)


def test_tool_stream():
    """Streamed tool calls on any model with room for the tools' prompt (tiny
    random ones too: tests/models/test_server_tool_stream.sh): tool_choice
    required (parallel and not) and named, sampled under several seeds; the
    deltas assembled as openai's docs show, and by the client's own stream
    helper where it has one, equal the non-streamed calls, and after every
    chunk the calls given out are all that has been generated of them
    (assemble_stream's trace, from the chunks' logprobs)."""
    seeds = int(os.environ.get("TOOL_STREAM_SEEDS", "3"))
    named = lambda n: {"type": "function", "function": {"name": n}}
    compared = cut = multi = fragments = 0
    for seed in range(seeds):
        for choice, parallel in (("required", True), ("required", False), (named("add"), True),
                                 (named("get_weather"), False)):
            kw = dict(model=MODEL, messages=[{"role": "user", "content": ["Weather in Oslo, and 2 + 3?",
                      "What is 7 + 8?", "Is it raining in Lima?"][seed % 3]}], tools=TOOLS, tool_choice=choice,
                      parallel_tool_calls=parallel, temperature=0.9, seed=seed, max_tokens=300)
            what = f"tool_choice {choice} parallel {parallel} seed {seed}"
            c = client.chat.completions.create(**kw).choices[0]
            want = calls_of(c.message)
            s_calls, frags, s_ids, s_fin, s_text = assemble_stream(trace=True, **kw)
            if c.finish_reason == "length":  # a call cut off: streamed in part
                check(s_fin == "length", f"{what}: cut off, streamed finish {s_fin}")
                cut += 1
                continue
            check(c.finish_reason == "tool_calls" and want and (parallel or len(want) == 1),
                  f"{what}: {c.finish_reason} {c.message}")
            check(s_calls == want and s_fin == "tool_calls" and not s_text.strip(),
                  f"{what}: streamed {s_calls} {s_fin} {s_text!r}, not streamed {want}")
            check(len(set(s_ids)) == len(s_ids) and not set(s_ids) & {t.id for t in c.message.tool_calls or []},
                  f"{what}: streamed ids {s_ids} unique and new")
            multi += len(want) > 1
            fragments += sum(frags)
            compared += 1
            helper = getattr(client.chat.completions, "stream", None) or getattr(client.beta.chat.completions,
                                                                                 "stream", None)
            if helper:
                with helper(**kw) as st:
                    got = calls_of(st.get_final_completion().choices[0].message)
                check(got == want, f"{what}: the client's stream helper assembled {got}, want {want}")
    # tool_choice auto: text, or calls from where the reply opens one
    for seed in range(seeds):
        kw = dict(model=MODEL, messages=[{"role": "user", "content": "Add 40 and 2."}], tools=TOOLS,
                  temperature=0.9, seed=seed, max_tokens=60)
        c = client.chat.completions.create(**kw).choices[0]
        s_calls, _, _, s_fin, s_text = assemble_stream(**kw)
        if c.message.tool_calls:
            check(s_calls == calls_of(c.message) and s_fin == c.finish_reason, f"auto seed {seed}: {s_calls} {c}")
        else:
            check(not s_calls and s_text == c.message.content and s_fin == c.finish_reason,
                  f"auto seed {seed}: streamed {s_calls} {s_text!r} {s_fin}, not streamed {c}")
    print(f"test_tool_stream: {compared} compared ({multi} with several calls, {fragments} argument fragments), "
          f"{cut} cut off by max_tokens")
    check(compared >= seeds, f"too few replies compared: {compared}")


def collect_stream(**kw):
    """A stream's deltas by choice index: the content, the transcript (the
    content with '@' where a call's first delta came), the calls (name,
    arguments) by index, their ids and the finish reason; early_ok: each
    content delta after a call came once that call's arguments were whole."""
    per = {}
    for chunk in client.chat.completions.create(stream=True, **kw):
        for ch in chunk.choices:
            st = per.setdefault(ch.index, dict(trace="", content="", calls={}, ids=[], finish=None, seen=[]))
            d = ch.delta
            st["finish"] = ch.finish_reason or st["finish"]
            if d.content:
                check(not d.tool_calls, f"a delta with content and tool_calls: {d}")
                st["content"] += d.content
                st["trace"] += d.content
                if st["calls"]:
                    last = max(st["calls"])
                    st["seen"].append((last, st["calls"][last][1]))
            for tc in d.tool_calls or []:
                if tc.index not in st["calls"]:
                    check(re.fullmatch(r"call_[0-9a-f]{24}", tc.id or "") and tc.type == "function" and
                          tc.function.name and tc.function.arguments == "" and tc.index == len(st["calls"]),
                          f"choice {ch.index}: first tool_calls delta {tc} after {len(st['calls'])} calls")
                    st["calls"][tc.index] = [tc.function.name, ""]
                    st["ids"].append(tc.id)
                    st["trace"] += "@"
                else:
                    check(tc.id is None and tc.function.name is None and tc.index == max(st["calls"]),
                          f"choice {ch.index}: later tool_calls delta {tc}")
                    st["calls"][tc.index][1] += tc.function.arguments or ""
    for st in per.values():
        st["list"] = [tuple(st["calls"][i]) for i in sorted(st["calls"])]
        st["early_ok"] = all(st["calls"][i][1] == a for i, a in st["seen"])
    return per


def transcript_of(raw):
    """A reply's content as the server's message gives it with calls (the text
    outside the <tool_call> blocks, each piece trimmed, joined by newlines),
    and the transcript a stream must make of it ('@' at each call)."""
    parts = re.split(r"<tool_call>.*?</tool_call>", raw, flags=re.S)
    content = trace = ""
    for i, p in enumerate(parts):
        p = p.strip()
        if p:
            add = ("\n" if content else "") + p
            content += add
            trace += add
        if i < len(parts) - 1:
            trace += "@"
    return trace, content


# Hermes-style replies with text after and between the calls, written by
# tiny random models under a grammar (the server's 'grammar' field)
_BLOCK = r'"<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": " [1-9] ", \"b\": " [1-9] [0-9]? "}}\n</tool_call>"'
TEXT_GRAMMARS = [
    'root ::= block "\\nThe sum is " [0-9]{1,3} ", " [a-z]{2,6} "."\nblock ::= ' + _BLOCK,
    'root ::= "Adding. " block "\\nthen " [a-z]{1,4} "\\n" block " Done " [a-z]{1,5} " \\n"\nblock ::= ' + _BLOCK,
]
HERMES_LIKE = os.environ.get("TOOL_FORMAT", "hermes") in ("hermes", "generic")


def test_tool_stream_text():
    """Text after (and between) tool calls streams as content deltas, in the
    reply's order among the calls' deltas: a streamed reply of calls and text
    (tool_choice auto, a grammar writing it) assembles to the non-streamed
    message of the same seed, calls, content and finish_reason tool_calls.
    Hermes-style <tool_call> formats only (in the others text after a call
    makes it no call)."""
    if not HERMES_LIKE:
        print("test_tool_stream_text: not a <tool_call> format, skipped")
        return
    compared = 0
    for g in TEXT_GRAMMARS:
        for seed in range(int(os.environ.get("TOOL_STREAM_SEEDS", "3"))):
            kw = dict(model=MODEL, messages=[{"role": "user", "content": "Add 3 and 4, then say the sum."}],
                      tools=TOOLS, temperature=0.9, seed=seed, max_tokens=200, extra_body={"grammar": g})
            what = f"grammar {TEXT_GRAMMARS.index(g)} seed {seed}"
            c = client.chat.completions.create(logprobs=True, **kw).choices[0]
            raw = b"".join(bytes(e.bytes) for e in (c.logprobs.content if c.logprobs else []) or []).decode(errors="replace")
            want = calls_of(c.message)
            trace, content = transcript_of(raw)
            check(c.finish_reason == "tool_calls" and want and c.message.content == content and
                  "tool_call" not in (c.message.content or "x"),
                  f"{what}: not streamed, {c.finish_reason} {c.message} from {raw!r}")
            st = collect_stream(**kw).get(0, {})
            check(st.get("list") == want and st.get("content") == c.message.content and
                  st.get("finish") == "tool_calls", f"{what}: streamed {st}, not streamed {want} {c.message.content!r}")
            check(st.get("trace") == trace and st.get("early_ok"),
                  f"{what}: streamed in the order {st.get('trace')!r}, want {trace!r} (content after a call once it is "
                  f"whole: {st.get('early_ok')})")
            check(not set(st.get("ids", [])) & {t.id for t in c.message.tool_calls or []}, f"{what}: fresh ids")
            compared += 1
    print(f"test_tool_stream_text: {compared} compared")


def test_tool_stream_n():
    """n = 2 streams with tools: each choice has its own calls (indices from 0,
    ids of its own) and content, and assembled per choice index they equal
    the non-streamed n = 2 reply of the same seed, whose choice k is the
    request alone with seed + k: tool_choice required, auto, and auto with
    calls and text (a grammar, <tool_call> formats)."""
    compared = cut = 0
    for seed in range(int(os.environ.get("TOOL_STREAM_SEEDS", "3"))):
        cases = [("required", None), ("auto", None)] + ([("auto", TEXT_GRAMMARS[1])] if HERMES_LIKE else [])
        for choice, g in cases:
            kw = dict(model=MODEL, messages=[{"role": "user", "content": "Weather in Oslo, and 2 + 3?"}], tools=TOOLS,
                      tool_choice=choice, n=2, temperature=0.9, seed=seed, max_tokens=300,
                      extra_body={"grammar": g} if g else None)
            what = f"n 2, tool_choice {choice}{' grammar' if g else ''} seed {seed}"
            r = client.chat.completions.create(**kw)
            got = collect_stream(**kw)
            check(sorted(got) == [0, 1] and len(r.choices) == 2, f"{what}: choices {sorted(got)}, {len(r.choices)}")
            # each choice is the request alone with seed + index (tool_choice auto's
            # grammar too: from where that choice opens a call, not from its start)
            for c in r.choices[1:]:
                alone = client.chat.completions.create(**dict(kw, n=1, seed=seed + c.index)).choices[0]
                check(calls_of(alone.message) == calls_of(c.message) and alone.message.content == c.message.content
                      and alone.finish_reason == c.finish_reason,
                      f"{what} choice {c.index}: {c.finish_reason} {c.message} != alone with seed {seed + c.index}: "
                      f"{alone.finish_reason} {alone.message}")
            ids = [i for st in got.values() for i in st["ids"]]
            check(len(set(ids)) == len(ids) and
                  not set(ids) & {t.id for c in r.choices for t in c.message.tool_calls or []},
                  f"{what}: streamed ids {ids} unique and new")
            for c in r.choices:
                st = got.get(c.index)
                if not st:
                    continue
                if c.finish_reason == "length":  # a call cut off: streamed in part
                    check(st["finish"] == "length", f"{what} choice {c.index}: cut off, streamed {st['finish']}")
                    cut += 1
                    continue
                check(st["list"] == calls_of(c.message) and (st["content"] or None) == c.message.content and
                      st["finish"] == c.finish_reason and st["early_ok"],
                      f"{what} choice {c.index}: streamed {st}, not streamed {c.finish_reason} {c.message}")
                check(choice != "required" or (c.finish_reason == "tool_calls" and c.message.tool_calls),
                      f"{what} choice {c.index}: required, {c.finish_reason} {c.message}")
                compared += 1
    print(f"test_tool_stream_n: {compared} choices compared, {cut} cut off by max_tokens")
    check(compared >= 2, f"too few choices compared: {compared}")


def model_bits(model):
    """Bits per weight of the model's tensor data, from `candle info`."""
    out = subprocess.run([os.environ["CANDLE_BIN"], "info", model], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    return float(re.search(r"bits/weight: +[0-9.]+ \(file\), ([0-9.]+) \(tensor data\)", out).group(1))


def logits_of(prompt):
    """`candle logits` for the prompt's last position: every (id, logit) of the
    vocabulary, best first; None without the binary."""
    exe, model = os.environ.get("CANDLE_BIN"), os.environ.get("CANDLE_MODEL")
    if not exe or not model:
        return None
    nv = client.models.list().data[0].model_extra["meta"]["n_vocab"]
    out = subprocess.run([exe, "logits", "-m", model, "-p", prompt, "--top", str(nv)], capture_output=True,
                         text=True, timeout=60, check=True).stdout.splitlines()
    return [(int(i), float(v)) for i, v in json.loads(out[-1])["top"]], len(out)


def test_logprobs():
    """logprobs in both endpoints, streamed and not, against `candle logits`;
    logit_bias banning and forcing."""
    prompt, n = "Once upon a time", 12
    kw = dict(model=MODEL, prompt=prompt, max_tokens=n, temperature=0, extra_body={"ignore_eos": True})
    r = client.completions.create(logprobs=5, **kw)
    c, lp = r.choices[0], r.choices[0].logprobs
    check(len(lp.tokens) == n == len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.text_offset),
          f"completion logprobs: one entry per token ({len(lp.tokens)} of {n})")
    check("".join(lp.tokens) == c.text, f"tokens {lp.tokens} spell the text {c.text!r}")
    check(lp.text_offset == [len("".join(lp.tokens[:i])) for i in range(len(lp.tokens))],
          f"text_offset {lp.text_offset}")
    for i, (t, v, top) in enumerate(zip(lp.tokens, lp.token_logprobs, lp.top_logprobs)):
        vals = list(top.values())
        check(len(top) == 5 and vals == sorted(vals, reverse=True) and all(x <= 0 for x in vals) and v <= 0,
              f"completion top_logprobs {i}: {top}")
        # greedy: the sampled token is the top-1, with its logprob
        check(next(iter(top)) == t and abs(top[t] - v) < 1e-6, f"greedy token {i} {t!r} {v} is the top-1 of {top}")
        check(sum(math.exp(x) for x in vals) <= 1 + 1e-5, f"probabilities over 1 at {i}")
    # streamed: the chunks' logprobs concatenate to the same
    toks, vals, text = [], [], ""
    for ch in client.completions.create(logprobs=5, stream=True, **kw):
        if ch.choices:
            text += ch.choices[0].text
            if ch.choices[0].logprobs:
                toks += ch.choices[0].logprobs.tokens
                vals += ch.choices[0].logprobs.token_logprobs
    check(text == c.text and toks == lp.tokens, f"streamed completion logprobs: {toks} != {lp.tokens}")
    check(len(vals) == n and all(abs(a - b) < 1e-4 for a, b in zip(vals, lp.token_logprobs)),
          f"streamed completion logprob values {vals} != {lp.token_logprobs}")
    # the numbers are the log-softmax of the model's logits (candle logits, the same prompt)
    ref = logits_of(prompt)
    if ref is None:
        print("test_logprobs: CANDLE_BIN/CANDLE_MODEL unset, no comparison with candle logits")
    else:
        ref, n_pos = ref
        check(n_pos == r.usage.prompt_tokens, f"candle logits positions {n_pos} != prompt tokens {r.usage.prompt_tokens}")
        m = max(v for _, v in ref)
        lse = m + math.log(sum(math.exp(v - m) for _, v in ref))
        want = [v - lse for _, v in ref[:5]]
        # the f32 KV pool of the second server gives the CLI's numbers to float rounding; this
        # server's f16 pool moves them by ~2e-3. On a quantized model (SmolLM2, where the
        # shared folder has no stories260K) the server's batched prompt and the CLI's take
        # different kernels whose 8-bit activations round apart (notes/issue-23.md, 2026-12-03):
        # there the top-5 probabilities are compared, within 0.02.
        quantized = model_bits(os.environ["CANDLE_MODEL"]) < 15.9

        def close(a, b, tol):
            return abs(math.exp(a) - math.exp(b)) < 0.02 if quantized else abs(a - b) < tol

        for url, tol in ((SMALL, 1e-4), (BASE, 5e-3)):
            if not url:
                continue
            cl = openai.OpenAI(base_url=url + "/v1", api_key=KEY, max_retries=0, timeout=60)
            one = cl.completions.create(model=MODEL, prompt=prompt, max_tokens=1, temperature=0, logprobs=5)
            got = list(one.choices[0].logprobs.top_logprobs[0].values())
            check(len(got) == 5 and all(close(a, b, tol) for a, b in zip(got, want)),
                  f"{url}: first token's top logprobs {got} != log-softmax of candle logits {want}")
        # logit_bias: -100 on the greedy token changes it; +100 on the 3rd likeliest forces it every step
        best, third = ref[0][0], ref[2][0]
        third_text = list(lp.top_logprobs[0])[2]
        b = client.completions.create(logprobs=1, logit_bias={str(best): -100}, **kw).choices[0]
        check(b.logprobs.tokens[0] != lp.tokens[0], f"logit_bias -100 on {best} ({lp.tokens[0]!r}): "
              f"{b.logprobs.tokens[0]!r}")
        # the reported numbers are after the bias: the runner-up's probability renormalised without the
        # banned token's (e^-100 of it left)
        p1, p2 = list(lp.top_logprobs[0].values())[:2]
        want = p2 - math.log(-math.expm1(p1))
        check(b.logprobs.tokens[0] == list(lp.top_logprobs[0])[1] and abs(b.logprobs.token_logprobs[0] - want) < 1e-3,
              f"logit_bias -100: the runner-up {b.logprobs.tokens[0]!r} at {b.logprobs.token_logprobs[0]}, want {want}")
        f = client.completions.create(logprobs=1, logit_bias={str(third): 100}, **kw).choices[0]
        check(f.logprobs.tokens == [third_text] * n and all(v > -1e-3 for v in f.logprobs.token_logprobs),
              f"logit_bias +100 on {third} ({third_text!r}): {f.logprobs.tokens} {f.logprobs.token_logprobs}")
        fs = client.completions.create(logprobs=1, logit_bias={str(third): 100}, stream=True, **kw)
        check("".join(ch.choices[0].text for ch in fs if ch.choices) == f.text, "logit_bias streamed")
    # temperature does not move the numbers (temperature 1, before truncation): the first
    # position's alternatives are the same when sampling
    s = client.completions.create(model=MODEL, prompt=prompt, max_tokens=1, temperature=0.3, seed=5, logprobs=5,
                                  extra_body={"top_k": 3})
    got = list(s.choices[0].logprobs.top_logprobs[0].values())
    check(len(got) == 5 and all(abs(a - b) < 1e-4 for a, b in zip(got, lp.top_logprobs[0].values())),
          f"sampled at temperature 0.3, top_k 3: top logprobs {got} equal greedy's")
    check(s.choices[0].logprobs.tokens[0] in list(lp.top_logprobs[0])[:3], "top_k 3 sampled within the top 3")
    # chat: logprobs.content, streamed and not
    msgs = [{"role": "user", "content": "Tell me a story."}]
    ck = dict(model=MODEL, messages=msgs, max_tokens=n, temperature=0)
    r = client.chat.completions.create(logprobs=True, top_logprobs=3, **ck)
    content = r.choices[0].logprobs.content
    check(len(content) == r.usage.completion_tokens - (r.choices[0].finish_reason == "stop"),
          f"chat logprobs: {len(content)} entries for {r.usage.completion_tokens} tokens")
    check("".join(e.token for e in content) == r.choices[0].message.content, "chat logprobs tokens spell the reply")
    for i, e in enumerate(content):
        t = [x.logprob for x in e.top_logprobs]
        check(len(t) == 3 and t == sorted(t, reverse=True) and e.logprob <= 0, f"chat top_logprobs {i}: {t}")
        check(e.top_logprobs[0].token == e.token and e.top_logprobs[0].logprob == e.logprob,
              f"chat greedy token {i} is the top-1")
        check(bytes(e.bytes) == e.token.encode(), f"chat bytes {e.bytes} of {e.token!r}")
    toks, vals = [], []
    for ch in client.chat.completions.create(logprobs=True, top_logprobs=3, stream=True, **ck):
        if ch.choices and ch.choices[0].logprobs and ch.choices[0].logprobs.content:
            toks += [e.token for e in ch.choices[0].logprobs.content]
            vals += [e.logprob for e in ch.choices[0].logprobs.content]
    check(toks == [e.token for e in content] and all(abs(a - e.logprob) < 1e-4 for a, e in zip(vals, content)),
          f"streamed chat logprobs {toks} != {[e.token for e in content]}")
    r0 = client.chat.completions.create(logprobs=True, **ck).choices[0].logprobs.content
    check(len(r0) == len(content) and all(e.top_logprobs == [] for e in r0), "top_logprobs 0: none listed")
    check(client.chat.completions.create(**ck).choices[0].logprobs is None, "no logprobs unless asked")
    # a stop sequence: the logprobs stop with the text
    full = c.text
    word = full.split()[2]
    st = client.completions.create(model=MODEL, prompt=prompt, max_tokens=n, temperature=0, stop=[word],
                                   logprobs=0).choices[0]
    joined = "".join(st.logprobs.tokens)
    # the tokens that begin within the text are listed, the stop sequence's own are not
    check(st.finish_reason == "stop" and st.text and joined.startswith(st.text) and
          len("".join(st.logprobs.tokens[:-1])) < len(st.text) and len(joined) <= len(st.text) + len(word),
          f"stop {word!r}: text {st.text!r}, tokens {st.logprobs.tokens}")


def cached_total():
    m = raw("GET", "/metrics")[1].decode()
    return int(re.search(r"^candle_prompt_tokens_cached_total (\d+)", m, re.M).group(1))


def test_n():
    """n > 1: n choices, each the request alone with seed + index, the prompt
    computed once and shared by the others (the prefix cache's counter)."""
    prompt = "Tom and Lily went to the park and saw a big"
    before = cached_total()
    r = client.completions.create(model=MODEL, prompt=prompt, max_tokens=16, temperature=1.0, seed=77, n=3,
                                  logprobs=1, extra_body={"ignore_eos": True})
    shared = cached_total() - before
    npr = r.usage.prompt_tokens
    check([c.index for c in r.choices] == [0, 1, 2], f"n=3 indices {[c.index for c in r.choices]}")
    check(r.usage.completion_tokens == 48 and r.usage.total_tokens == npr + 48, f"n=3 usage {r.usage}")
    check(shared >= 2 * (npr - 1), f"n=3: {shared} prompt tokens shared, want >= {2 * (npr - 1)}")
    texts = [c.text for c in r.choices]
    check(len(set(texts)) > 1, f"n=3 sampled choices all alike: {texts}")
    for k, c in enumerate(r.choices):
        alone = client.completions.create(model=MODEL, prompt=prompt, max_tokens=16, temperature=1.0, seed=77 + k,
                                          extra_body={"ignore_eos": True}).choices[0].text
        check(c.text == alone, f"n=3 choice {k} {c.text!r} != the request alone with seed {77 + k} {alone!r}")
        check(len(c.logprobs.tokens) == 16 and "".join(c.logprobs.tokens) == c.text, f"n=3 choice {k} logprobs")
    # streamed: each index's chunks spell that choice, logprobs included
    got, lps, fins = {}, {}, {}
    for ch in client.completions.create(model=MODEL, prompt=prompt, max_tokens=16, temperature=1.0, seed=77, n=3,
                                        logprobs=1, stream=True, extra_body={"ignore_eos": True}):
        for c in ch.choices:
            got[c.index] = got.get(c.index, "") + c.text
            lps[c.index] = lps.get(c.index, []) + (c.logprobs.tokens if c.logprobs else [])
            fins[c.index] = c.finish_reason or fins.get(c.index)
    check(got == {k: t for k, t in enumerate(texts)} and all(lps[k] == r.choices[k].logprobs.tokens for k in lps)
          and fins == {0: "length", 1: "length", 2: "length"}, f"n=3 streamed {got} {fins} != {texts}")
    s = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_tokens=8,
                                       temperature=0, n=2, stream=True, stream_options={"include_usage": True})
    roles, usage = {}, None
    for ch in s:
        usage = ch.usage or usage
        for c in ch.choices:
            if c.delta.role:
                roles[c.index] = roles.get(c.index, 0) + 1
    check(roles == {0: 1, 1: 1} and usage and usage.completion_tokens <= 16, f"chat n=2 stream: roles {roles} {usage}")
    # a client that leaves a stream of several choices frees all their slots
    sock = socket.create_connection((U.hostname, U.port))
    body = json.dumps({"prompt": "Once upon a time", "max_tokens": 200, "stream": True, "n": 3,
                       "ignore_eos": True}).encode()
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                 b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (KEY.encode(), len(body), body))
    sock.recv(100)
    sock.close()
    for _ in range(50):
        m = raw("GET", "/metrics")[1].decode()
        if "candle_active_sequences 0" in m:
            break
        time.sleep(0.1)
    check("candle_active_sequences 0" in m, "n=3 stream left: its sequences freed")
    r = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_tokens=8,
                                       temperature=0, n=2, logprobs=True, top_logprobs=2)
    check(len(r.choices) == 2 and r.choices[0].message.content == r.choices[1].message.content and
          all(len(c.logprobs.content) > 0 for c in r.choices), "chat n=2 greedy: two equal choices with logprobs")


def test_chat():
    r = client.chat.completions.create(model=MODEL, messages=[
        {"role": "system", "content": "You are kind."}, {"role": "user", "content": "Hello"}],
        max_tokens=12, temperature=0)
    m = r.choices[0].message
    check(m.role == "assistant" and isinstance(m.content, str), "chat message")
    check(r.usage.completion_tokens <= 12, "chat usage")
    text, finish = stream_text("Hello", 12, chat=True)
    check(text == m.content or finish is not None, "chat stream")


def test_stream():
    text, finish = stream_text("Once upon a time", 20)
    check(text == greedy("Once upon a time", 20), "stream equals non-stream")
    check(finish == "length", f"stream finish {finish}")
    s = client.completions.create(model=MODEL, prompt="Hi", max_tokens=5, stream=True,
                                  stream_options={"include_usage": True})
    usage = [c.usage for c in s if c.usage]
    check(usage and usage[0].completion_tokens == 5, "stream usage")


def test_concurrent(n=18):
    seq = [greedy(p) for p in PROMPTS[:n]]
    got = [None] * n

    def run(i):
        got[i] = stream_text(PROMPTS[i])[0]
    ts = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for i in range(n):
        check(got[i] == seq[i], f"concurrent stream {i}: {got[i]!r} != {seq[i]!r}")


def test_concurrent_chat(n=16):
    """Chat streams (the serving benchmark's load) at once = one at a time."""
    seq = [stream_text(p, chat=True)[0] for p in PROMPTS[:n]]
    got = [None] * n

    def run(i):
        got[i] = stream_text(PROMPTS[i], chat=True)[0]
    ts = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for i in range(n):
        check(got[i] == seq[i], f"concurrent chat stream {i}: {got[i]!r} != {seq[i]!r}")


def test_burst_shares(n=6):
    """Requests sent together with one prompt compute it once: the others wait
    for its rows (published by the step that computes them) or find them
    published, and share all but the last token; all get the same text."""
    prompt = "Lily and Ben found a shiny stone by the river, and they"
    res = [None] * n

    def run(i):
        res[i] = client.completions.create(model=MODEL, prompt=prompt, max_tokens=8, temperature=0)
    ts = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    npr = res[0].usage.prompt_tokens
    cached = sorted(r.usage.prompt_tokens_details.cached_tokens for r in res)
    check(cached[0] < npr - 1 and cached[1:] == [npr - 1] * (n - 1),
          f"burst of one prompt: cached {cached} of {npr}")
    check(len({r.choices[0].text for r in res}) == 1, "burst of one prompt: one text")


def bad_inputs():
    """Each bad request gets its OpenAI-shaped error and status."""
    cases = [
        ("POST", "/v1/completions", b"{not json", 400, "invalid_json"),
        ("POST", "/v1/completions", b"[1,2]", 400, "invalid_json"),
        # jansson's "near '...'" cuts the character after the bad escape in two (fuzz_server:
        # the error JSON could not be built, a 500 "out of memory")
        ("POST", "/v1/completions", b'{"prompt": "\\u00\xe2\x96\x81"}', 400, "invalid_json"),
        ("POST", "/v1/completions", json.dumps({"prompt": 5}).encode(), 400, "invalid_type"),
        ("POST", "/v1/completions", json.dumps({"prompt": "x", "temperature": "hot"}).encode(), 400, "invalid_type"),
        ("POST", "/v1/completions", json.dumps({"prompt": "x", "max_tokens": 10**12}).encode(), 400, "invalid_value"),
        ("POST", "/v1/completions", json.dumps({"prompt": "x", "max_tokens": -1}).encode(), 400, "invalid_value"),
        ("POST", "/v1/completions", json.dumps({"prompt": "x", "top_p": 7}).encode(), 400, "invalid_value"),
        ("POST", "/v1/completions", json.dumps({"prompt": "x", "stop": [""]}).encode(), 400, "invalid_type"),
        ("POST", "/v1/completions", json.dumps({"prompt": [1, 99999]}).encode(), 400, "invalid_value"),
        ("POST", "/v1/completions", json.dumps({"prompt": "word " * 400}).encode(), 400, "context_length_exceeded"),
        ("POST", "/v1/chat/completions", json.dumps({"messages": "hi"}).encode(), 400, "invalid_type"),
        ("POST", "/v1/chat/completions", json.dumps({"messages": [{"role": "user"}]}).encode(), 400, "invalid_type"),
        ("POST", "/v1/embeddings", json.dumps({"input": "hi"}).encode(), 400, "model_not_supported"),
        # fields not implemented yet are refused, never ignored (issue 22, finding 13)
        ("POST", "/v1/chat/completions", json.dumps({"messages": [{"role": "user", "content": "hi"}],
         "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema":
                             {"type": "number", "multipleOf": 0.3}}}}).encode(), 400, "unsupported_parameter"),
        ("POST", "/v1/chat/completions", json.dumps({"messages": [{"role": "user", "content": "hi"}],
         "response_format": {"type": "xml"}}).encode(), 400, "invalid_value"),
        # tools: a bad array, function or choice is refused naming its field
        *[("POST", "/v1/chat/completions", json.dumps({"messages": [{"role": "user", "content": "hi"}], **b}).encode(),
           400, code, param) for b, code, param in (
            ({"tools": {"type": "function"}}, "invalid_type", "tools"),
            ({"tools": [{"type": "function", "function": {"description": "no name"}}]}, "invalid_value", "tools"),
            ({"tools": [{"type": "function", "function": {"name": "bad name!"}}]}, "invalid_value", "tools"),
            ({"tools": [{"type": "retrieval"}]}, "invalid_value", "tools"),
            ({"tools": [{"type": "function", "function": {"name": "f", "parameters": "object"}}]}, "invalid_value",
             "tools"),
            ({"tools": [{"type": "function", "function": {"name": "f"}}] * 2}, "invalid_value", "tools"),
            ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {
                "type": "object", "properties": {"s": {"type": "string", "pattern": "(a)\\1"}}}}}],
              "tool_choice": "required"}, "unsupported_parameter", "tools"),
            ({"tools": [{"type": "function", "function": {"name": "f"}}],
              "tool_choice": {"type": "function", "function": {"name": "g"}}}, "invalid_value", "tool_choice"),
            ({"tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "always"}, "invalid_value",
             "tool_choice"),
            ({"tool_choice": "required"}, "invalid_value", "tool_choice"),
            ({"tools": [{"type": "function", "function": {"name": "f"}}], "parallel_tool_calls": "yes"},
             "invalid_type", "parallel_tool_calls"),
            # grammar (llama-server's GBNF field): a string that parses, not beside response_format
            ({"grammar": 5}, "invalid_type", "grammar"),
            ({"grammar": "root ::= undefined-rule"}, "unsupported_parameter", "grammar"),
            ({"grammar": 'root ::= "x"', "response_format": {"type": "json_object"}}, "invalid_value", "grammar"),
            ({"functions": [{"name": "f"}]}, "unsupported_parameter", "functions"),
            ({"function_call": "auto"}, "unsupported_parameter", "function_call"))],
        ("POST", "/v1/chat/completions", json.dumps({"messages": [{"role": "user", "content": "hi"}, {
         "role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function",
                                                               "function": {"name": "f"}}]}]}).encode(),
         400, "invalid_value", "messages"),
        ("POST", "/v1/chat/completions", json.dumps({"messages": [{"role": "tool", "content": "1",
         "tool_call_id": 5}]}).encode(), 400, "invalid_type", "messages"),
        ("POST", "/v1/completions", json.dumps({"prompt": "x", "tools": [{"type": "function", "function": {
         "name": "f"}}]}).encode(), 400, "unsupported_parameter", "tools"),
        # logprobs and logit_bias out of range name their field
        ("POST", "/v1/chat/completions", json.dumps({"messages": [{"role": "user", "content": "hi"}],
         "logprobs": True, "top_logprobs": 21}).encode(), 400, "invalid_value", "top_logprobs"),
        ("POST", "/v1/chat/completions", json.dumps({"messages": [{"role": "user", "content": "hi"}],
         "top_logprobs": 2}).encode(), 400, "invalid_value", "top_logprobs"),
        ("POST", "/v1/chat/completions", json.dumps({"messages": [{"role": "user", "content": "hi"}],
         "logprobs": 3}).encode(), 400, "invalid_type", "logprobs"),
        ("POST", "/v1/completions", json.dumps({"prompt": "x", "logprobs": 6}).encode(), 400, "invalid_value",
         "logprobs"),
        ("POST", "/v1/completions", json.dumps({"prompt": "x", "logprobs": True}).encode(), 400, "invalid_type",
         "logprobs"),
        ("POST", "/v1/completions", json.dumps({"prompt": "x", "logit_bias": {"5": 101}}).encode(), 400,
         "invalid_value", "logit_bias"),
        ("POST", "/v1/completions", json.dumps({"prompt": "x", "logit_bias": {"abc": 1}}).encode(), 400,
         "invalid_value", "logit_bias"),
        ("POST", "/v1/completions", json.dumps({"prompt": "x", "logit_bias": {"99999999": 1}}).encode(), 400,
         "invalid_value", "logit_bias"),
        ("POST", "/v1/chat/completions", json.dumps({"messages": [{"role": "user", "content": "hi"}],
         "logit_bias": [5]}).encode(), 400, "invalid_type", "logit_bias"),
        ("POST", "/v1/completions", json.dumps({"prompt": "x", "n": 9}).encode(), 400, "invalid_value", "n"),
        ("POST", "/v1/completions", json.dumps({"prompt": "x", "echo": True, "logprobs": 1}).encode(), 400,
         "unsupported_parameter", "echo"),
        ("POST", "/v1/completions", json.dumps({"prompt": "x", "n": 0}).encode(), 400, "invalid_value", "n"),
        ("GET", "/v1/nothing", None, 404, "not_found"),
        ("GET", "/v1/completions", None, 405, "method_not_allowed"),
    ]
    for method, path, body, status, code, *param in cases:
        st, e = error_of(*raw(method, path, body))
        check(st == status and e is not None and e.get("code") == code and (not param or e.get("param") == param[0]),
              f"{method} {path} {body[:40] if body else ''!r}: {st} {e}")
    # an oversized body is refused from its Content-Length before reading; a
    # chunked one, whatever its size, is refused up front (411)
    for chunked in (False, True):
        s = socket.create_connection((U.hostname, U.port))
        size = 2 << 20
        head = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n" % KEY.encode()
        if chunked:
            s.sendall(head + b"Transfer-Encoding: chunked\r\n\r\n%x\r\n" % size)
        else:
            s.sendall(head + b"Content-Length: %d\r\n\r\n" % size)
        resp = b""
        while b"}}" not in resp:
            d = s.recv(65536)
            if not d:
                break
            resp += d
        s.close()
        want = b"HTTP/1.1 411" if chunked else b"HTTP/1.1 413"
        check(resp.startswith(want) and (b"length_required" if chunked else b"body_too_large") in resp,
              f"oversized body (chunked={chunked}): {resp[:80]!r}")
    # missing or wrong key: 401 (health stays open)
    st, e = error_of(*raw("GET", "/v1/models", key=None))
    check(st == 401 and e and e["type"] == "authentication_error", f"no key: {st}")
    st, _ = error_of(*raw("GET", "/v1/models", key=KEY + "x"))
    check(st == 401, "wrong key")
    check(raw("GET", "/health", key=None)[0] == 200, "health without key")
    try:
        openai.OpenAI(base_url=BASE + "/v1", api_key="wrong", max_retries=0).models.list()
        check(False, "client with wrong key")
    except openai.AuthenticationError:
        pass
    try:
        client.completions.create(model=MODEL, prompt="x", max_tokens=10**9)
        check(False, "client absurd max_tokens")
    except openai.BadRequestError:
        pass


def disconnects():
    """Clients that leave mid-stream or mid-request, and a slow one."""
    for path, stream in (("/v1/completions", True), ("/v1/completions", False)):
        s = socket.create_connection((U.hostname, U.port))
        body = json.dumps({"prompt": "Once upon a time", "max_tokens": 200, "stream": stream,
                           "ignore_eos": True}).encode()
        s.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                  b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                  % (path.encode(), KEY.encode(), len(body), body))
        time.sleep(0.2)
        s.close()
    # a client that sends half its body and stalls does not block the others
    s = socket.create_connection((U.hostname, U.port))
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
              b"Content-Length: 100\r\n\r\n{\"pro" % KEY.encode())
    check(len(greedy("The cat said", 8)) > 0, "served beside a stalled client")
    s.close()


def test_bad_inputs_under_load():
    seq = [greedy(p, 32) for p in PROMPTS[:8]]
    got = [None] * 8

    def run(i):
        got[i] = stream_text(PROMPTS[i], 32)[0]
    ts = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    for t in ts:
        t.start()
    bad_inputs()
    disconnects()
    for t in ts:
        t.join()
    for i in range(8):
        check(got[i] == seq[i], f"load stream {i} disturbed by bad inputs")
    # everything freed: no sequence left running, no block reserved
    for _ in range(50):
        m = raw("GET", "/metrics")[1].decode()
        if "candle_active_sequences 0" in m and "candle_kv_blocks_used 0" in m:
            break
        time.sleep(0.1)
    check("candle_active_sequences 0" in m and "candle_kv_blocks_used 0" in m,
          "slots and blocks freed after disconnects")


def test_metrics():
    m = raw("GET", "/metrics")[1].decode()
    for name in ("candle_requests_total{", "candle_generated_tokens_total", "candle_queue_depth",
                 "candle_kv_blocks_used", "candle_time_to_first_token_seconds_bucket",
                 "candle_inter_token_latency_seconds_bucket", "candle_prompt_tokens_total",
                 "candle_step_rows_bucket", "candle_step_prefill_rows_bucket",
                 "candle_step_seconds_bucket", "candle_step_prefill_budget"):
        check(name in m, f"metric {name}")
    # steps ran, none over 256 rows; prompt rows are some of the rows
    def buckets(name):
        return {l.split('"')[1]: int(l.split()[-1]) for l in m.splitlines()
                if l.startswith(name + "_bucket{")}
    rows, pre = buckets("candle_step_rows"), buckets("candle_step_prefill_rows")
    check(rows.get("+Inf", 0) > 0 and rows.get("256") == rows["+Inf"], f"step rows {rows}")
    check(pre.get("+Inf") == rows.get("+Inf") and all(pre[k] >= rows[k] for k in rows),
          f"prompt rows per step {pre} within rows {rows}")


def test_queue_full():
    if not SMALL:
        return
    u = urllib.parse.urlparse(SMALL)
    codes = []

    def run():
        st, _ = raw("POST", "/v1/completions", json.dumps(
            {"prompt": "Once upon a time", "max_tokens": 100, "ignore_eos": True}).encode(),
            host=u.hostname, port=u.port, key=None)
        codes.append(st)
    ts = [threading.Thread(target=run) for _ in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    check(200 in codes and 429 in codes, f"queue full gives 429: {sorted(codes)}")
    # --kv-mem holds 9 blocks of 16 positions (test_server.sh sizes it for the model): two
    # requests of 7 blocks cannot run together, so the second waited instead of failing
    # (above: no 5xx), and one that could never fit is refused up front
    check(all(c in (200, 429) for c in codes), f"kv-bound requests wait, not fail: {codes}")
    m = raw("GET", "/metrics", host=u.hostname, port=u.port, key=None)[1].decode()
    check("candle_kv_blocks_total 9" in m, "kv pool sized by --kv-mem")
    st, e = error_of(*raw("POST", "/v1/completions", json.dumps(
        {"prompt": "Once upon a time", "max_tokens": 200}).encode(), host=u.hostname, port=u.port,
        key=None))
    check(st == 400 and e and "KV cache blocks" in e["message"], f"never fits: {st} {e}")


# test_tools needs a model that follows instructions and a context for the
# tools' prompt (tests/slow/test_server_tools.sh runs it): not in ALL
ALL = (test_basic, test_response_format, test_logprobs, test_n, test_chat, test_stream, test_concurrent, test_burst_shares, test_bad_inputs_under_load,
       test_metrics, test_queue_full)
ONLY = [x for x in os.environ.get("SERVER_TESTS", "").split(",") if x]
for name in ONLY:
    check(name in globals() and name.startswith("test_"), f"SERVER_TESTS: no test {name}")
for t in [globals()[x] for x in ONLY if x in globals()] if ONLY else ALL:
    t0 = time.time()
    try:
        t()
    except Exception as e:  # a crash of one test is a failure, the rest still run
        check(False, f"{t.__name__} raised {type(e).__name__}: {e}")
    print(f"{t.__name__}: {time.time() - t0:.1f}s", flush=True)
print("FAILED" if failures else "OK", len(failures))
sys.exit(1 if failures else 0)
