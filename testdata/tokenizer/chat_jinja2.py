#!/usr/bin/env python3
"""Renders chat_jinja2.json's conversations with tokenizer_config.json's chat
template the way transformers' apply_chat_template does (Jinja2's sandboxed
environment, trim_blocks and lstrip_blocks, loop controls, a tojson that keeps
key order and non-ASCII text, raise_exception), and writes each case's text.

    python3 chat_jinja2.py   # in this folder; needs Jinja2 (3.1.6 made the file)
"""
import json

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception

config = json.load(open("tokenizer_config.json", encoding="utf-8"))
template = env.from_string(config["chat_template"])
data = json.load(open("chat_jinja2.json", encoding="utf-8"))
for case in data["cases"]:
    case["text"] = template.render(
        messages=case["messages"],
        tools=case.get("tools"),
        add_generation_prompt=case["add_generation_prompt"],
        enable_thinking=case["enable_thinking"],
        eos_token=config["eos_token"],
        pad_token=config["pad_token"],
    )
data["made_by"] = "chat_jinja2.py, Jinja2 " + jinja2.__version__
with open("chat_jinja2.json", "w", encoding="utf-8") as f:
    json.dump(data, f, ensure_ascii=False, indent=1)
    f.write("\n")
