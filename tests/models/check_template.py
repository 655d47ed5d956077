"""snug's chat templates (src/genai/template*.c) against jinja2, rendered as
transformers' apply_chat_template renders them (chat_template_utils.py of
transformers 4.45-5.x: ImmutableSandboxedEnvironment(trim_blocks=True,
lstrip_blocks=True, extensions=[AssistantTracker, loopcontrols]) with
raise_exception, strftime_now and transformers' own tojson; messages, tools=None,
documents=None, add_generation_prompt and the special tokens as variables).

Templates under test:
  smollm2      the SmolLM2 fixture's tokenizer_config.json (models.build writes it),
               read through snug's sn_chat_config_load as well (tpl_render --dir)
  zephyr       TinyLlama-1.1B-Chat-v1.0 / Zephyr (newline-separated tags: trim_blocks)
  llama2       Llama-2-chat (raise_exception on role alternation, .strip())
  llama3       Meta-Llama-3-8B-Instruct
  llama31      Meta-Llama-3.1-8B-Instruct (tools, tojson(indent=4), items, reject)
  qwen25       Qwen2.5-Instruct (tools, tool_calls, tool responses)
  qwen3        Qwen3 (messages[::-1], namespace, split/rstrip/lstrip, enable_thinking)
  phi3         Phi-3-mini-4k-instruct (current and the first published version)
  mistral01    Mistral-7B-Instruct-v0.1/v0.2 (raise_exception on alternation)
  mistral03    Mistral-7B-Instruct-v0.3 (selectattr, ns.index, tool calls, out[:-1])
The templates are written here as they appear in those models' tokenizer_config.json
(llama31 as the JSON string itself). There is no network access to the model hub
where this was written: llama31's text was taken from a public copy of the file,
the others were written from knowledge of the published files and may differ from
the hub's current revision in details; what this check asserts is snug == jinja2 on
these texts, which holds whatever revision they are.

Each template is rendered on every conversation of CONVERSATIONS with and without
add_generation_prompt; the outputs must be equal byte for byte, and where jinja2
raises (raise_exception, an undefined value used) snug must fail too (with the
raise_exception message when jinja2's was one). SNIPPETS are small templates of
single constructs, held to the same rule; a few may be refused by snug
(SNUG_ERR_UNSUPPORTED) where marked.

  bash tests/models/py.sh tests/models/check_template.py --tpl-render build/tests/models/tpl_render
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from datetime import datetime

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

MODELS = os.environ.get("SNUG_MODELS", os.path.expanduser("~/.cache/snug/models"))
SNUG_UNSUPPORTED = 4


# ---- the oracle: jinja2 as transformers sets it up -------------------------------

class AssistantTracker(jinja2.ext.Extension):
    """transformers' {% generation %} tag: renders its body (the tracking is not
    part of the text)."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_generation_support"), [], [], body).set_lineno(lineno)

    def _generation_support(self, caller):
        return caller()


def _raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def _tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(fmt):
    return datetime.now().strftime(fmt)


ENV = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                    extensions=[AssistantTracker, jinja2.ext.loopcontrols])
ENV.filters["tojson"] = _tojson
ENV.globals["raise_exception"] = _raise_exception
ENV.globals["strftime_now"] = _strftime_now


def jinja_render(template, messages, add_generation_prompt, bos, eos, extra):
    """(ok, text or exception message, is_raise_exception)"""
    kwargs = {}
    if bos is not None:
        kwargs["bos_token"] = bos
    if eos is not None:
        kwargs["eos_token"] = eos
    kwargs.update(extra or {})
    if "messages" in kwargs:
        messages = kwargs.pop("messages")
    tools = kwargs.pop("tools", None)
    documents = kwargs.pop("documents", None)
    try:
        out = ENV.from_string(template).render(messages=messages, tools=tools, documents=documents,
                                               add_generation_prompt=add_generation_prompt, **kwargs)
        return True, out, False
    except jinja2.exceptions.TemplateError as e:
        return False, str(e), type(e) is jinja2.exceptions.TemplateError
    except Exception as e:  # TypeError and the like, raised from inside the template
        return False, f"{type(e).__name__}: {e}", False


# ---- snug's side ------------------------------------------------------------------

class Snug:
    def __init__(self, exe):
        self.p = subprocess.Popen([exe], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                  encoding="utf-8")

    def render(self, template, messages, add_generation_prompt, bos, eos, extra):
        req = {"template": template, "messages": messages, "add_generation_prompt": add_generation_prompt,
               "bos_token": bos, "eos_token": eos}
        if extra:
            req["extra_json"] = json.dumps(extra, ensure_ascii=False)
        self.p.stdin.write(json.dumps(req, ensure_ascii=False) + "\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError("tpl_render died")
        kind, _, rest = line.rstrip("\n").partition(" ")
        if kind == "OK":
            return True, bytes.fromhex(rest).decode("utf-8"), 0
        code, _, msg = rest.partition(" ")
        return False, msg, int(code)

    def close(self):
        self.p.stdin.close()
        self.p.wait()


# ---- templates ----------------------------------------------------------------------

# Meta-Llama-3.1-8B-Instruct's chat_template as the JSON string of its tokenizer_config.json.
LLAMA31_JSON = r'''"{{- bos_token }}\n{%- if custom_tools is defined %}\n    {%- set tools = custom_tools %}\n{%- endif %}\n{%- if not tools_in_user_message is defined %}\n    {%- set tools_in_user_message = true %}\n{%- endif %}\n{%- if not date_string is defined %}\n    {%- set date_string = \"26 Jul 2024\" %}\n{%- endif %}\n{%- if not tools is defined %}\n    {%- set tools = none %}\n{%- endif %}\n\n{#- This block extracts the system message, so we can slot it into the right place. #}\n{%- if messages[0]['role'] == 'system' %}\n    {%- set system_message = messages[0]['content']|trim %}\n    {%- set messages = messages[1:] %}\n{%- else %}\n    {%- set system_message = \"\" %}\n{%- endif %}\n\n{#- System message + builtin tools #}\n{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}\n{%- if builtin_tools is defined or tools is not none %}\n    {{- \"Environment: ipython\\n\" }}\n{%- endif %}\n{%- if builtin_tools is defined %}\n    {{- \"Tools: \" + builtin_tools | reject('equalto', 'code_interpreter') | join(\", \") + \"\\n\\n\"}}\n{%- endif %}\n{{- \"Cutting Knowledge Date: December 2023\\n\" }}\n{{- \"Today Date: \" + date_string + \"\\n\\n\" }}\n{%- if tools is not none and not tools_in_user_message %}\n    {{- \"You have access to the following functions. To call a function, please respond with JSON for a function call.\" }}\n    {{- 'Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its value}.' }}\n    {{- \"Do not use variables.\\n\\n\" }}\n    {%- for t in tools %}\n        {{- t | tojson(indent=4) }}\n        {{- \"\\n\\n\" }}\n    {%- endfor %}\n{%- endif %}\n{{- system_message }}\n{{- \"<|eot_id|>\" }}\n\n{#- Custom tools are passed in a user message with some extra guidance #}\n{%- if tools_in_user_message and not tools is none %}\n    {#- Extract the first user message so we can plug it in here #}\n    {%- if messages | length != 0 %}\n        {%- set first_user_message = messages[0]['content']|trim %}\n        {%- set messages = messages[1:] %}\n    {%- else %}\n        {{- raise_exception(\"Cannot put tools in the first user message when there's no first user message!\") }}\n{%- endif %}\n    {{- '<|start_header_id|>user<|end_header_id|>\\n\\n' -}}\n    {{- \"Given the following functions, please respond with a JSON for a function call \" }}\n    {{- \"with its proper arguments that best answers the given prompt.\\n\\n\" }}\n    {{- 'Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its value}.' }}\n    {{- \"Do not use variables.\\n\\n\" }}\n    {%- for t in tools %}\n        {{- t | tojson(indent=4) }}\n        {{- \"\\n\\n\" }}\n    {%- endfor %}\n    {{- first_user_message + \"<|eot_id|>\"}}\n{%- endif %}\n\n{%- for message in messages %}\n    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}\n        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' }}\n    {%- elif 'tool_calls' in message %}\n        {%- if not message.tool_calls|length == 1 %}\n            {{- raise_exception(\"This model only supports single tool-calls at once!\") }}\n        {%- endif %}\n        {%- set tool_call = message.tool_calls[0].function %}\n        {%- if builtin_tools is defined and tool_call.name in builtin_tools %}\n            {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}\n            {{- \"<|python_tag|>\" + tool_call.name + \".call(\" }}\n            {%- for arg_name, arg_val in tool_call.arguments | items %}\n                {{- arg_name + '=\"' + arg_val + '\"' }}\n                {%- if not loop.last %}\n                    {{- \", \" }}\n                {%- endif %}\n                {%- endfor %}\n            {{- \")\" }}\n        {%- else  %}\n            {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}\n            {{- '{\"name\": \"' + tool_call.name + '\", ' }}\n            {{- '\"parameters\": ' }}\n            {{- tool_call.arguments | tojson }}\n            {{- \"}\" }}\n        {%- endif %}\n        {%- if builtin_tools is defined %}\n            {#- This means we're in ipython mode #}\n            {{- \"<|eom_id|>\" }}\n        {%- else %}\n            {{- \"<|eot_id|>\" }}\n        {%- endif %}\n    {%- elif message.role == \"tool\" or message.role == \"ipython\" %}\n        {{- \"<|start_header_id|>ipython<|end_header_id|>\\n\\n\" }}\n        {%- if message.content is mapping or message.content is iterable %}\n            {{- message.content | tojson }}\n        {%- else %}\n            {{- message.content }}\n        {%- endif %}\n        {{- \"<|eot_id|>\" }}\n    {%- endif %}\n{%- endfor %}\n{%- if add_generation_prompt %}\n    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}\n{%- endif %}\n"'''

TEMPLATES = {
    "zephyr": ("{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\n' + message['content'] + eos_token }}\n{% elif message['role'] == 'system' %}\n{{ '<|system|>\n' + message['content'] + eos_token }}\n{% elif message['role'] == 'assistant' %}\n{{ '<|assistant|>\n'  + message['content'] + eos_token }}\n{% endif %}\n{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n{% endfor %}",
               "<s>", "</s>"),
    "llama2": ("{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}",
               "<s>", "</s>"),
    "llama3": ("{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}",
               "<|begin_of_text|>", "<|eot_id|>"),
    "llama31": (json.loads(LLAMA31_JSON), "<|begin_of_text|>", "<|eot_id|>"),
    "qwen25": ("""{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>" }}
    {%- for tool in tools %}
        {{- "\\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}\\n</tool_call><|im_end|>\\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}
    {%- else %}
        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\\n<tool_call>\\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\\n<tool_response>\\n' }}
        {{- message.content }}
        {{- '\\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}
""", None, "<|im_end|>"),
    "qwen3": ("""{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if messages[0].role == 'system' %}
        {{- messages[0].content + '\\n\\n' }}
    {%- endif %}
    {{- "# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>" }}
    {%- for tool in tools %}
        {{- "\\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}\\n</tool_call><|im_end|>\\n" }}
{%- else %}
    {%- if messages[0].role == 'system' %}
        {{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}
    {%- endif %}
{%- endif %}
{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" and message.content is string and not(message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}
        {%- set ns.multi_step_tool = false %}
        {%- set ns.last_query_index = index %}
    {%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- if message.content is string %}
        {%- set content = message.content %}
    {%- else %}
        {%- set content = '' %}
    {%- endif %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>' + '\\n' }}
    {%- elif message.role == "assistant" %}
        {%- set reasoning_content = '' %}
        {%- if message.reasoning_content is string %}
            {%- set reasoning_content = message.reasoning_content %}
        {%- else %}
            {%- if '</think>' in content %}
                {%- set reasoning_content = content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') %}
                {%- set content = content.split('</think>')[-1].lstrip('\\n') %}
            {%- endif %}
        {%- endif %}
        {%- if loop.index0 > ns.last_query_index %}
            {%- if loop.last or (not loop.last and reasoning_content) %}
                {{- '<|im_start|>' + message.role + '\\n<think>\\n' + reasoning_content.strip('\\n') + '\\n</think>\\n\\n' + content.lstrip('\\n') }}
            {%- else %}
                {{- '<|im_start|>' + message.role + '\\n' + content }}
            {%- endif %}
        {%- else %}
            {{- '<|im_start|>' + message.role + '\\n' + content }}
        {%- endif %}
        {%- if message.tool_calls %}
            {%- for tool_call in message.tool_calls %}
                {%- if (loop.first and content) or (not loop.first) %}
                    {{- '\\n' }}
                {%- endif %}
                {%- if tool_call.function %}
                    {%- set tool_call = tool_call.function %}
                {%- endif %}
                {{- '<tool_call>\\n{"name": "' }}
                {{- tool_call.name }}
                {{- '", "arguments": ' }}
                {%- if tool_call.arguments is string %}
                    {{- tool_call.arguments }}
                {%- else %}
                    {{- tool_call.arguments | tojson }}
                {%- endif %}
                {{- '}\\n</tool_call>' }}
            {%- endfor %}
        {%- endif %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role == "tool" %}
        {%- if loop.first or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\\n<tool_response>\\n' }}
        {{- content }}
        {{- '\\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\\n\\n</think>\\n\\n' }}
    {%- endif %}
{%- endif %}""", None, "<|im_end|>"),
    "phi3": ("{% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>\n' + message['content'] + '<|end|>\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\n' + message['content'] + '<|end|>\n'}}{% elif message['role'] == 'assistant' %}{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %}",
             "<s>", "<|endoftext|>"),
    "phi3-first": ("{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') %}{{'<|user|>' + '\n' + message['content'] + '<|end|>' + '\n' + '<|assistant|>' + '\n'}}{% elif (message['role'] == 'assistant') %}{{message['content'] + '<|end|>' + '\n'}}{% endif %}{% endfor %}",
                   "<s>", "<|endoftext|>"),
    "mistral01": ("{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}",
                  "<s>", "</s>"),
    "mistral03": ("""{%- if messages[0]["role"] == "system" %}
    {%- set system_message = messages[0]["content"] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}
{%- set user_messages = loop_messages | selectattr("role", "equalto", "user") | list %}

{#- This block checks for alternating user/assistant messages, skipping tool calling messages #}
{%- set ns = namespace() %}
{%- set ns.index = 0 %}
{%- for message in loop_messages %}
    {%- if not (message.role == "tool" or message.role == "tool_results" or (message.tool_calls is defined and message.tool_calls is not none)) %}
        {%- if (message["role"] == "user") != (ns.index % 2 == 0) %}
            {{- raise_exception("After the optional system message, conversation roles must alternate user/assistant/user/assistant/...") }}
        {%- endif %}
        {%- set ns.index = ns.index + 1 %}
    {%- endif %}
{%- endfor %}

{{- bos_token }}
{%- for message in loop_messages %}
    {%- if message["role"] == "user" %}
        {%- if tools is not none and (message == user_messages[-1]) %}
            {{- "[AVAILABLE_TOOLS] [" }}
            {%- for tool in tools %}
                {%- set tool = tool.function %}
                {{- '{"type": "function", "function": {' }}
                {%- for key, val in tool.items() if key != "return" %}
                    {%- if val is string %}
                        {{- '"' + key + '": "' + val + '"' }}
                    {%- else %}
                        {{- '"' + key + '": ' + val|tojson }}
                    {%- endif %}
                    {%- if not loop.last %}
                        {{- ", " }}
                    {%- endif %}
                {%- endfor %}
                {{- "}}" }}
                {%- if not loop.last %}
                    {{- ", " }}
                {%- else %}
                    {{- "]" }}
                {%- endif %}
            {%- endfor %}
            {{- "[/AVAILABLE_TOOLS]" }}
            {%- endif %}
        {%- if loop.last and system_message is defined %}
            {{- "[INST] " + system_message + "\\n\\n" + message["content"] + "[/INST]" }}
        {%- else %}
            {{- "[INST] " + message["content"] + "[/INST]" }}
        {%- endif %}
    {%- elif message.tool_calls is defined and message.tool_calls is not none %}
        {{- "[TOOL_CALLS] [" }}
        {%- for tool_call in message.tool_calls %}
            {%- set out = tool_call.function|tojson %}
            {{- out[:-1] }}
            {%- if not tool_call.id is defined or tool_call.id|length != 9 %}
                {{- raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}
            {%- endif %}
            {{- ', "id": "' + tool_call.id + '"}' }}
            {%- if not loop.last %}
                {{- ", " }}
            {%- else %}
                {{- "]" + eos_token }}
            {%- endif %}
        {%- endfor %}
    {%- elif message["role"] == "assistant" %}
        {{- " " + message["content"]|trim + eos_token}}
    {%- elif message["role"] == "tool_results" or message["role"] == "tool" %}
        {%- if message.content is defined and message.content.content is defined %}
            {%- set content = message.content.content %}
        {%- else %}
            {%- set content = message.content %}
        {%- endif %}
        {{- '[TOOL_RESULTS] {"content": ' + content|string + ", " }}
        {%- if not message.tool_call_id is defined or message.tool_call_id|length != 9 %}
            {{- raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}
        {%- endif %}
        {{- '"call_id": "' + message.tool_call_id + '"}[/TOOL_RESULTS]' }}
    {%- else %}
        {{- raise_exception("Only user and assistant roles are supported, with the exception of an initial optional system message!") }}
    {%- endif %}
{%- endfor %}
""", "<s>", "</s>"),
}


# ---- conversations ----------------------------------------------------------------------

def m(role, content):
    return {"role": role, "content": content}


UNICODE = "héllo wörld ✓ 日本語 🤖 — «quotes» ‘single’"
QUOTES = 'He said "hi", then \'bye\' and left a \\ backslash and {{ braces }} {% tags %}'
LINES = "line one\nline two\n\n   indented\ttab\r\nwindows line"
SPACES = "   leading and trailing spaces \n\n"

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Get the weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"},
                                                    "days": {"type": "integer"}},
                   "required": ["city"]}}}]
TOOL_MSGS = [
    m("system", "You can call tools."),
    m("user", "What's the weather in Zürich?"),
    {"role": "assistant", "content": "", "tool_calls": [{"id": "abc123xyz", "type": "function", "function": {
        "name": "get_weather", "arguments": {"city": "Zürich", "days": 2}}}]},
    {"role": "tool", "content": "{\"temp\": 21.5, \"sky\": \"clear\"}", "tool_call_id": "abc123xyz"},
    m("assistant", "It is 21.5 °C and clear."),
    m("user", "Thanks!"),
]

# (name, messages, extra variables); every one with and without add_generation_prompt
CONVERSATIONS = [
    ("user", [m("user", "Hi!")], None),
    ("system_user", [m("system", "You are terse."), m("user", "Hi!")], None),
    ("multi", [m("system", "Be helpful."), m("user", "What is 2+2?"), m("assistant", "4."),
               m("user", "And 3+3?"), m("assistant", "6."), m("user", "Thanks")], None),
    ("no_system", [m("user", "a"), m("assistant", "b"), m("user", "c")], None),
    ("ends_assistant", [m("user", "a"), m("assistant", "b")], None),
    ("unicode", [m("system", UNICODE), m("user", QUOTES), m("assistant", LINES), m("user", SPACES)], None),
    ("empty", [m("user", ""), m("assistant", ""), m("user", " ")], None),
    ("not_alternating", [m("user", "one"), m("user", "two")], None),
    ("assistant_first", [m("assistant", "hello"), m("user", "hi")], None),
    ("unknown_role", [m("user", "hi"), m("narrator", "meanwhile"), m("user", "hi again")], None),
    ("think", [m("user", "q1"), m("assistant", "<think>\nreasoning\n</think>\n\nanswer 1"), m("user", "q2")],
     {"enable_thinking": False}),
    ("tools", None, {"messages": TOOL_MSGS, "tools": TOOLS}),
    ("date", [m("system", "sys"), m("user", "u")], {"date_string": "01 Jan 2025"}),
]


# ---- snippets: one construct each ---------------------------------------------------------

SNIPPETS = [
    "{% set x = 1 %}{% for i in [1,2] %}{{ x }}{% set x = x + 1 %}{{x}}{% endfor %}{{ x }}",
    "{% for i in [1,2] %}{% if i == 2 %}{{ y }}{% endif %}{% set y = i %}{% endfor %}{{ y }}",
    "{% if true %}{% set z = 3 %}{% endif %}{{ z }}",
    "{{ 1/2 }} {{ 4/2 }} {{ 7//2 }} {{ -7 % 3 }} {{ 1e20 }} {{ 1.5e-5 }} {{ 0.1+0.2 }} {{ [1,'a',none,true] }} {{ {'a':1} }}",
    "{{ x.y }}",
    "{{ x is defined }} {{ none is none }}{{ 'a\\'b' }}{{ \"x'\" }}{{ ['it\\'s'] }}",
    "a\n  {% if true %}\n  b\n  {% endif %}\nc\n",
    "  {%- if true -%}  x  {%- endif -%}  \n  {%+ if true %}y{% endif +%}\nz",
    "{# c #}\n  {# indented comment #}\nx {#- strip -#} y\n{{ 'v' }}   {#+ keep #}\n",
    "{% raw %}{{ not a tag }}{% endraw %}\n  {% raw -%}  x {{ y }}  {%- endraw %}",
    "{{ 'abc'[::-1] }} {{ [1,2,3][1:] }} {{ 'héllo'[1] }} {{ 'abc' * 2 }} {{ [1,2,3,4,5][-2:] }} {{ 'abcdef'[1:5:2] }} {{ [1,2,3][::-2] }}",
    "{{ (1,2) }} {{ (1,) }} {{ range(3) }} {{ range(1, 10, 3) }} {{ range(3)|list }} {{ 'x'|tojson }}",
    "{{ x + 1 }}",
    "{{ 1 if false }}|{{ messages|length }}|{{ 'a' if true else 'b' }}",
    "{{ 'a' + 1 }}",
    "{{ 3 == 3.0 }} {{ true == 1 }} {{ 'a' < 'b' }} {{ [1] == [1] }} {{ [1] == (1,) }} {{ {'a': 1} == {'a': 1.0} }}",
    "{% for a in [] %}x{% else %}empty{% endfor %}",
    "{{ ' a b '.split() }} {{ 'a,b,,c'.split(',') }} {{ 'a b c'.split(' ', 1) }} {{ 'a b'|title }} {{ 'hello world'.title() }}",
    "{{ 1.0 }} {{ 2.5|int }} {{ '3'|int }} {{ ' 4 '|int }} {{ 'x'|int }} {{ '2.5'|int }} {{ 1e16 }} {{ 123456789012345678.0 }} {{ 1e-7 }} {{ 1234567890123456.0 }}",
    "{{ d.x }}|{{ l[5] }}|{{ none }}|{{ 'x' in u }}|{{ u|length }}|{{ u|default('a') }}|{{ u == u }}|{{ u ~ 'a' }}|{{ not u }}",
    "{{ u|tojson }}",
    "{{ u + 'a' }}",
    "{{ u.x }}",
    "{{ u[0] }}",
    "{% for x in u %}a{% endfor %}|{{ u is none }}|{{ u|string }}|{{ u|trim }}",
    "{{ {'b':1,'a':[1,2.5,none,true,'é\"\\n\\u0001']}|tojson }}|{{ {'b':1,'a':[]}|tojson(indent=2) }}|{{ {'b':1,'a':{}}|tojson(sort_keys=true) }}|{{ 'abc'|first }}",
    "{{ [1, {'k': [true, none]}]|tojson(indent=4) }}|{{ {'a': 1}|tojson(separators=(',', ':')) }}|{{ 'é'|tojson(ensure_ascii=true) }}|{{ '🤖'|tojson(true) }}",
    "{{ [1,2]|join(', ') }}|{{ 3|string + 'a' }}|{{ 'a' ~ 1.0 }}|{{ true ~ '' }}|{{ [1,'a']|string }}",
    "{% for i in 'ab' %}{{ loop.cycle('x','y') }}{{ loop.previtem }}{{ loop.revindex0 }}{{ loop.revindex }}{{loop.depth}}{{ loop.nextitem }}{{ loop.first }}{{ loop.last }}{% endfor %}",
    "{{ 'abca'.strip('a') }}|{{ {'a':1}.get('b', 3) }}|{{ {'a':1}.get('a') }}|{{ {'a':1}.get('z') }}|{{ {'a':1}|items|list }}|{{ {'a':1}.items()|list }}",
    "{{ messages|selectattr('role','equalto','system')|list }}|{{ messages|map(attribute='role')|join(',') }}|{{ messages[0].role|upper }}|{{ messages|rejectattr('role', 'eq', 'system')|map(attribute='content')|list }}",
    "{{ messages|selectattr('role','equalto','user')|list|length }}|{{ messages|selectattr('role', 'equalto', 'user')|first }}",
    "{% set ns = namespace(a=1, b='x') %}{% for i in [1,2] %}{% set ns.a = ns.a + i %}{% endfor %}{{ ns.a }}{{ ns.b }}",
    "{{ 'Hello wORLD-x(y'|title }}|{{ 'hELLO wORLD'|capitalize }}|{{ 'ab'|replace('a','c') }}|{{ '  a  '|trim }}|{{ 'ab'|length }}|{{ 'xxax'|trim('x') }}",
    "{{ 1 < 2 < 3 }}|{{ 3 > 2 > 2 }}|{{ 'a' not in 'abc' }}|{{ not 1 in [1] }}|{{ -2 ** 2 }}|{{ 2 ** -1 }}|{{ 7 % -3 }}|{{ 7.5 // 2 }}|{{ -7 // 2 }}|{{ 2 ** 10 }}",
    "{{ 1 == 1 and 'x' or 'y' }}|{{ 0 or '' }}|{{ [] or 0 }}|{{ 'a' and 0 }}|{{ none or 'd' }}",
    "{{ '\\u00e9\\x41\\t|\\d\\101' }}",
    "{% macro f(a, b='q') %}[{{a}}{{b}}]{% endmacro %}{{ f(1) }}{{ f(2, b=3) }}{{ f(b=4, a=5) }}{{ f() }}",
    "{% set x %}abc {{ 1 + 1 }}{% endset %}{{ x }}|{{ x|length }}{% set y | upper %}low{% endset %}{{ y }}",
    "{{ 'a\"b' }}{{ ['a\"b', \"it's\", 'x\\ny', 'é', '\\x00\\x7f', 'both\\'\"', '\\\\'] }}",
    "{{ 10/3 }}|{{ 2.0*3 }}|{{ 1e100 }}|{{ 0.0001 }}|{{ 0.00001 }}|{{ -0.0 }}|{{ 3|float }}|{{ 1.5|round }}|{{ 2.5|round }}|{{ 2.675|round(2) }}|{{ 7|round }}|{{ 2.1|round(method='ceil') }}",
    "{{ true + 1 }}|{{ [1] + [2] }}|{{ 'ab' * 0 }}|{{ x is mapping }}|{{ 'a' is iterable }}|{{ 3 is number }}|{{ true is number }}|{{ none is string }}|{{ 3 is integer }}|{{ 3.0 is float }}|{{ 4 is even }}|{{ 9 is divisibleby 3 }}",
    "{% for a, b in [(1,2),(3,4)] %}{{a}}{{b}}{% endfor %}{% for k, v in {'x':1, 'y': 2}.items() %}{{k}}={{v}};{% endfor %}",
    "{% for m in [1,2,3] if m > 1 %}{{ loop.index }}/{{ loop.length }}{% else %}none{% endfor %}",
    "{% for m in [1,2,3] %}{% if m == 2 %}{% continue %}{% endif %}{{ m }}{% if m == 3 %}{% break %}{% endif %}{% endfor %}",
    "{{ raise_exception('boom: ' ~ 42) }}",
    "{% generation %}abc{% endgeneration %}",
    "{% for i in range(2) %}{% for j in range(2) %}{{ loop.index }}{{ loop.depth }}{% endfor %}{{ loop.index }}{% endfor %}",
    "{{ 'x' is string }}{{ 'x' is lower }}{{ 'X' is upper }}{{ x is sequence }}{{ true is sameas true }}{{ none is sameas none }}{{ 1 is boolean }}",
    "{{ 'ÄÖÜ'|lower }}{{ 'çà'|upper }}{{ 'ǆ'|capitalize }}",
    "{{ 'ß'|upper }}",
    "{{ messages[0]['content'] | trim | length }}|{{ messages[-1].content[:3] }}|{{ messages[1:]|length }}",
    "{{ {'a': 1, 'b': 2}|length }}{% for k in {'a': 1, 'b': 2} %}{{ k }}{% endfor %}{{ 'b' in {'a': 1, 'b': 2} }}",
    "{{ 'text\nwith lines\n\nand blank'|indent(2) }}|{{ 'a\nb'|indent(first=true) }}|{{ 'a\n\nb'|indent(3, blank=true) }}",
    "{{ 'abc'.startswith('a') }}{{ 'abc'.endswith(('x', 'c')) }}{{ 'a-b'.replace('-', '+') }}{{ 'aaa'.replace('a', 'b', 2) }}{{ 'ab'.replace('', '-') }}{{ 'hello'.find('l') }}{{ 'hello'.count('l') }}{{ ', '.join(['a', 'b']) }}",
    "{{ 'x'.format(1) }}",
    "{{ '%s' % 1 }}",
    "{% include 'x' %}",
    "{% for x in y %}",
    "{% if x %}a{% endfor %}",
    "{{ x|wordwrap }}",
    "{{ foo( }}",
    "{{ [1, 2] | reverse | list }}{{ 'abc'|reverse }}{{ [3, 1]|first }}{{ [3, 1]|last }}",
    "{{ strftime_now('%Y') | length }}",
    "{{ dict(a=1, b='x') }}{{ namespace(x=1).x }}",
    "{{ message }}{% set message = 'set' %}{{ message }}",
    "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c = (1, 2) %}{{ c[0] }}",
    "{{ messages[0] }}",
    "{{ 'ab' ~ none ~ 1 ~ [1] }}",
    "{{ 9223372036854775807 + 1 }}",
    "{% for i in [1] %}{{ loop.length }}{% endfor %}{{ loop.index }}",
]
# snug may refuse these (SNUG_ERR_UNSUPPORTED) where jinja2 renders them.
SNIPPET_REFUSALS = {
    "{{ 'ß'|upper }}",
    "{{ 9223372036854775807 + 1 }}",
    "{{ 'x'.format(1) }}",
    "{{ '%s' % 1 }}",
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tpl-render", required=True)
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()

    templates = dict(TEMPLATES)
    fixture = os.path.join(MODELS, "smollm2-135m", "genai")
    cfg_path = os.path.join(fixture, "tokenizer_config.json")
    if not os.path.exists(cfg_path):
        print(f"FAIL: {cfg_path} is missing (models.build makes it)")
        return 1
    with open(cfg_path, encoding="utf-8") as f:
        cfg = json.load(f)

    def tok(v):
        return v["content"] if isinstance(v, dict) else v
    templates["smollm2"] = (cfg["chat_template"], tok(cfg.get("bos_token")), tok(cfg.get("eos_token")))

    failures = 0
    # sn_chat_config_load on the fixture folder finds the same template and tokens
    out = subprocess.run([args.tpl_render, "--dir", fixture], capture_output=True, text=True, check=False).stdout
    got = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    want_t, want_b, want_e = templates["smollm2"]
    if (bytes.fromhex(got.get("template", "").strip()).decode() != want_t or got.get("bos") != (want_b or "-")
            or got.get("eos") != (want_e or "-")):
        print(f"FAIL: sn_chat_config_load({fixture}) gave {out!r}")
        failures += 1

    snug = Snug(args.tpl_render)
    renders = raised = 0
    for name, (tpl, bos, eos) in templates.items():
        for cname, msgs, extra in CONVERSATIONS:
            for agp in (False, True):
                j = jinja_render(tpl, msgs or [], agp, bos, eos, extra)
                s = snug.render(tpl, msgs or [], agp, bos, eos, extra)
                what = f"{name} x {cname} (add_generation_prompt={agp})"
                renders += 1
                if j[0] and s[0] and j[1] == s[1]:
                    continue
                if not j[0] and not s[0] and (not j[2] or ("raise_exception: " + j[1]) in s[1]):
                    raised += 1
                    if args.verbose:
                        print(f"both fail: {what}: jinja2 {j[1]!r}; snug {s[1]!r}")
                    continue
                failures += 1
                print(f"FAIL: {what}")
                print(f"  jinja2: {j[1]!r}" if j[0] else f"  jinja2 raised: {j[1]}")
                print(f"  snug:   {s[1]!r}" if s[0] else f"  snug failed ({s[2]}): {s[1]}")
    print(f"{len(templates)} templates x {len(CONVERSATIONS)} conversations x 2 = {renders} renders, "
          f"{raised} raised in both, {failures} differences")

    sfail = refused = 0
    for tpl in SNIPPETS:
        msgs = [m("system", "  sys  "), m("user", "hello")]
        j = jinja_render(tpl, msgs, True, "<s>", "</s>", {"d": {}, "l": [1], "x": {}})
        s = snug.render(tpl, msgs, True, "<s>", "</s>", {"d": {}, "l": [1], "x": {}})
        if j[0] and s[0] and j[1] == s[1]:
            continue
        if not j[0] and not s[0]:
            if args.verbose:
                print(f"both fail: {tpl!r}: jinja2 {j[1]!r}; snug {s[1]!r}")
            continue
        if j[0] and not s[0] and s[2] == SNUG_UNSUPPORTED and tpl in SNIPPET_REFUSALS:
            refused += 1
            continue
        sfail += 1
        print(f"FAIL: snippet {tpl!r}")
        print(f"  jinja2: {j[1]!r}" if j[0] else f"  jinja2 raised: {j[1]}")
        print(f"  snug:   {s[1]!r}" if s[0] else f"  snug failed ({s[2]}): {s[1]}")
    snug.close()
    print(f"{len(SNIPPETS)} snippets, {refused} refused as expected, {sfail} differences")
    return 1 if failures or sfail else 0


if __name__ == "__main__":
    sys.exit(main())
