"""Jinja sources of the built-in chat formats (``--chat-template NAME``).

These templates receive messages that :mod:`llamars.chat.templates` has already
normalised: ``content`` is always a string (content-part arrays joined, ``None``
turned into ``""``) and the OpenAI ``developer`` role has been mapped to
``system``.  None of them emits a leading BOS: the tokenizer adds it.  Where a
format has an end-of-sequence marker *between* turns (``</s>``), it is written
literally, because it belongs to the format rather than to the tokenizer.

Formats follow the model families' published prompt formats and llama.cpp's
built-in implementations of the same names.
"""
from __future__ import annotations

from typing import Dict

CHATML = r"""
{%- for message in messages -%}
{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\n' }}{%- endif -%}
"""

# Meta Llama 2 chat: the system prompt goes inside the first [INST] block.
LLAMA2 = r"""
{%- set ns = namespace(system='', first=true) -%}
{%- for message in messages if message['role'] == 'system' -%}
{%- set ns.system = ns.system + ('\n\n' if ns.system else '') + message['content'] | trim -%}
{%- endfor -%}
{%- for message in messages if message['role'] != 'system' -%}
{%- if message['role'] == 'assistant' -%}
{{ ' ' + message['content'] | trim + ' </s>' }}
{%- else -%}
{{ ('' if ns.first else '<s>') + '[INST] ' }}
{%- if ns.first and ns.system -%}{{ '<<SYS>>\n' + ns.system + '\n<</SYS>>\n\n' }}{%- endif -%}
{{ message['content'] | trim + ' [/INST]' }}
{%- endif -%}
{%- set ns.first = false -%}
{%- endfor -%}
"""

LLAMA3 = r"""
{%- for message in messages -%}
{%- set role = 'ipython' if message['role'] == 'tool' else message['role'] -%}
{{ '<|start_header_id|>' + role + '<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' }}
{%- endfor -%}
{%- if add_generation_prompt -%}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{%- endif -%}
"""

# Gemma has only "user" and "model" turns; a leading system message is prepended
# to the first turn's content, followed by a blank line.
GEMMA = r"""
{%- set ns = namespace(prefix='') -%}
{%- set loop_messages = messages -%}
{%- if messages and messages[0]['role'] == 'system' -%}
{%- set loop_messages = messages[1:] -%}
{%- if loop_messages -%}
{%- set ns.prefix = messages[0]['content'] + '\n\n' -%}
{%- else -%}
{%- set loop_messages = [{'role': 'user', 'content': messages[0]['content']}] -%}
{%- endif -%}
{%- endif -%}
{%- for message in loop_messages -%}
{%- set role = 'model' if message['role'] == 'assistant' else 'user' -%}
{{ '<start_of_turn>' + role + '\n' + (ns.prefix if loop.first else '') + message['content'] | trim + '<end_of_turn>\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}{{ '<start_of_turn>model\n' }}{%- endif -%}
"""

# Mistral v7 (SentencePiece variant, as llama.cpp's "mistral-v7").
MISTRAL = r"""
{%- for message in messages -%}
{%- if message['role'] == 'system' -%}
{{ '[SYSTEM_PROMPT] ' + message['content'] + '[/SYSTEM_PROMPT]' }}
{%- elif message['role'] == 'assistant' -%}
{{ ' ' + message['content'] + '</s>' }}
{%- elif message['role'] == 'tool' -%}
{{ '[TOOL_RESULTS] ' + message['content'] + '[/TOOL_RESULTS]' }}
{%- else -%}
{{ '[INST] ' + message['content'] + '[/INST]' }}
{%- endif -%}
{%- endfor -%}
"""

PHI3 = r"""
{%- for message in messages -%}
{{ '<|' + message['role'] + '|>\n' + message['content'] + '<|end|>\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}{{ '<|assistant|>\n' }}{%- endif -%}
"""

ZEPHYR = r"""
{%- set eos = eos_token or '</s>' -%}
{%- for message in messages -%}
{{ '<|' + message['role'] + '|>\n' + message['content'] + eos + '\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}{{ '<|assistant|>\n' }}{%- endif -%}
"""

# DeepSeek LLM (v1) chat.
DEEPSEEK = r"""
{%- for message in messages -%}
{%- if message['role'] == 'system' -%}
{{ message['content'] + '\n\n' }}
{%- elif message['role'] == 'assistant' -%}
{{ 'Assistant: ' + message['content'] + '<｜end▁of▁sentence｜>' }}
{%- else -%}
{{ 'User: ' + message['content'] + '\n\n' }}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{ 'Assistant:' }}{%- endif -%}
"""

DEEPSEEK3 = r"""
{%- for message in messages -%}
{%- if message['role'] == 'system' -%}
{{ message['content'] + '\n\n' }}
{%- elif message['role'] == 'assistant' -%}
{{ '<｜Assistant｜>' + message['content'] + '<｜end▁of▁sentence｜>' }}
{%- elif message['role'] == 'tool' -%}
{{ '<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>' + message['content'] + '<｜tool▁output▁end｜><｜tool▁outputs▁end｜>' }}
{%- else -%}
{{ '<｜User｜>' + message['content'] }}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{ '<｜Assistant｜>' }}{%- endif -%}
"""

VICUNA = r"""
{%- for message in messages -%}
{%- if message['role'] == 'system' -%}
{{ message['content'] + '\n\n' }}
{%- elif message['role'] == 'assistant' -%}
{{ 'ASSISTANT: ' + message['content'] + '</s>\n' }}
{%- else -%}
{{ 'USER: ' + message['content'] + '\n' }}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{ 'ASSISTANT:' }}{%- endif -%}
"""

COMMAND_R = r"""
{%- set tokens = {'system': '<|SYSTEM_TOKEN|>', 'tool': '<|SYSTEM_TOKEN|>', 'assistant': '<|CHATBOT_TOKEN|>'} -%}
{%- for message in messages -%}
{{ '<|START_OF_TURN_TOKEN|>' + tokens.get(message['role'], '<|USER_TOKEN|>') + message['content'] | trim + '<|END_OF_TURN_TOKEN|>' }}
{%- endfor -%}
{%- if add_generation_prompt -%}{{ '<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>' }}{%- endif -%}
"""

GRANITE = r"""
{%- for message in messages -%}
{%- set role = 'tool_response' if message['role'] == 'tool' else message['role'] -%}
{{ '<|start_of_role|>' + role + '<|end_of_role|>' + message['content'] + '<|end_of_text|>\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}{{ '<|start_of_role|>assistant<|end_of_role|>' }}{%- endif -%}
"""

BUILTIN_TEMPLATES: Dict[str, str] = {
    "chatml": CHATML,
    "llama2": LLAMA2,
    "llama3": LLAMA3,
    "gemma": GEMMA,
    "mistral": MISTRAL,
    "phi3": PHI3,
    "zephyr": ZEPHYR,
    "deepseek": DEEPSEEK,
    "deepseek3": DEEPSEEK3,
    "vicuna": VICUNA,
    "command-r": COMMAND_R,
    "granite": GRANITE,
}

# Alternative spellings accepted by ``--chat-template`` (llama.cpp's names).
ALIASES: Dict[str, str] = {
    "mistral-v7": "mistral",
    "llama2-sys": "llama2",
    "llama2-sys-bos": "llama2",
    "gemma2": "gemma",
    "gemma3": "gemma",
    "phi-3": "phi3",
    "command_r": "command-r",
}
