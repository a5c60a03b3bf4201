"""Go text/template as LocalAI's model templates use it (chat/gotemplate.py): output as Go
renders these templates (each expected string written from Go's documented semantics:
trim markers eat all adjacent whitespace, a missing map key prints <no value>, range
over a map goes in key order), and clear errors for what it does not take."""
from __future__ import annotations

import pytest

from llamars.chat.gotemplate import GoTemplate
from llamars.chat.templates import TemplateError

CHATML_MSG = """<|im_start|>{{if eq .RoleName "assistant"}}assistant{{else if eq .RoleName "system"}}system{{else if eq .RoleName "tool"}}tool{{else if eq .RoleName "user"}}user{{end}}
{{- if .FunctionCall }}
<tool_call>
{{- else if eq .RoleName "tool" }}
<tool_response>
{{- end }}
{{- if .Content}}
{{.Content }}
{{- end }}
{{- if .FunctionCall}}
{{toJson .FunctionCall}}
{{- end }}
{{- if .FunctionCall }}
</tool_call>
{{- else if eq .RoleName "tool" }}
</tool_response>
{{- end }}<|im_end|>"""


@pytest.mark.parametrize("data,want", [
    ({"RoleName": "user", "Content": "hello"}, "<|im_start|>user\nhello<|im_end|>"),
    ({"RoleName": "tool", "Content": "42"}, "<|im_start|>tool\n<tool_response>\n42\n</tool_response><|im_end|>"),
    ({"RoleName": "assistant", "FunctionCall": {"name": "f", "arguments": {"a": 1}}},
     '<|im_start|>assistant\n<tool_call>\n{"name":"f","arguments":{"a":1}}\n</tool_call><|im_end|>'),
])
def test_a_gallery_chat_message_template(data, want):
    assert GoTemplate(CHATML_MSG).render(data) == want


@pytest.mark.parametrize("src,data,want", [
    ("{{.A}}-{{.B.C}}-{{.Missing}}", {"A": 1, "B": {"C": "x"}}, "1-x-<no value>"),
    ("a  {{- .A -}}  b", {"A": "X"}, "aXb"),
    ("{{/* a comment */}}x{{- /* trimmed */ -}} y", {}, "xy"),
    ("{{range $i, $e := .L}}{{$i}}={{$e}};{{else}}none{{end}}", {"L": ["a", "b"]}, "0=a;1=b;"),
    ("{{range .L}}{{.}}{{else}}none{{end}}", {"L": []}, "none"),
    ("{{range $k, $v := .M}}{{$k}}:{{$v}} {{end}}", {"M": {"b": 2, "a": 1}}, "a:1 b:2 "),
    ("{{with .A}}[{{.}}]{{else}}empty{{end}}", {"A": ""}, "empty"),
    ("{{ $x := .A }}{{ $x }}{{ $x = 5 }}{{ $x }}", {"A": 3}, "35"),
    ("{{ if and .A (not .B) }}yes{{ end }}{{ if or .B .C }}no{{ else }}ok{{ end }}", {"A": 1, "B": 0, "C": ""}, "yesok"),
    ("{{ printf \"%s=%d %q %5s|%-3s|\" .K .V .K .K .K }}", {"K": "k", "V": 7}, 'k=7 "k"     k|k  |'),
    ("{{ len .L }} {{ index .L 1 }} {{ index .M \"a\" }} {{ slice .S 1 3 }}", {"L": [1, 2], "M": {"a": "z"}, "S": "hello"}, "2 2 z el"),
    ("{{ .S | upper }} {{ \"  pad \" | trim }} {{ toJson .L }} {{ `raw\\n` }}", {"S": "a", "L": [1, "x"]}, 'A pad [1,"x"] raw\\n'),
    ("{{ if eq .N 3 }}three{{ end }}{{ if lt .N 4 }} lt{{ end }}{{ if eq .R \"a\" \"b\" }} in{{ end }}", {"N": 3, "R": "b"}, "three lt in"),
    ("{{ print 1 true nil }} {{ println \"x\" }}", {}, "1true<nil> x\n"),
])
def test_semantics(src, data, want):
    assert GoTemplate(src).render(data) == want


@pytest.mark.parametrize("src,needle", [
    ("{{if .X}}open", "{{if}} without {{end}}"),
    ("x{{end}}", "unexpected {{end}}"),
    ("{{ .X ", "unclosed action"),
    ("{{ nope .X }}", 'function "nope" not defined'),
    ('{{ template "x" }}', "{{template}} is not supported"),
    ("{{ .S.x }}", "can't evaluate field x"),
    ("{{ range .N }}{{ end }}", "range can't iterate over"),
    ("{{ $u }}", "undefined variable $u"),
    ("line1\n{{ index .L 5 }}", "line 2"),
])
def test_errors_name_the_problem(src, needle):
    with pytest.raises(TemplateError, match=None) as e:
        GoTemplate(src, "t").render({"S": "s", "N": "x", "L": [1]})
    assert needle in str(e.value)


def test_runaway_templates_stop():
    with pytest.raises(TemplateError, match="loop turns"):
        GoTemplate("{{range .A}}{{range $.A}}{{end}}{{end}}").render({"A": list(range(1000))})
    with pytest.raises(TemplateError, match="MiB"):
        GoTemplate("{{range .A}}{{$.S}}{{end}}").render({"A": list(range(5000)), "S": "x" * 4096})
