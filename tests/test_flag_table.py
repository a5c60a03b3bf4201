"""Every flag of llama-server's 2026 flag table (../shared/seeds/llama-server-README-2026.md,
or the copy in tests/fixtures) is known to llamars-server and is one of: implemented,
accepted with a one-line warning that it has no effect here, owned by a feature not built
yet (refused with a message naming it, unless it asks for what llamars does anyway), or
removed (refused, as llama-server refuses it). No flag makes llamars-server exit for
being unknown."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from llamars.cli import _BY_NAME, CLIError, _parse
from llamars.cli_options import OPTIONS

HERE = Path(__file__).parent
_SEED = HERE.parent.parent / "shared" / "seeds" / "llama-server-README-2026.md"
_COPY = HERE / "fixtures" / "llama_server" / "flag-table-2026.md"


def _table():
    text = (_SEED if _SEED.exists() else _COPY).read_text(encoding="utf-8")
    rows = []
    for line in text.splitlines():
        m = re.match(r"^\| `(-[^`]+)` \| (.*) \|$", line)
        if not m:
            continue
        col, expl = m.group(1).replace("\\|", "|"), m.group(2)
        parts = col.split(", ")
        last = parts[-1].split(" ", 1)
        parts[-1] = last[0]
        env = re.findall(r"\(env: ([A-Z_]+)\)", expl)
        rows.append((parts, last[1] if len(last) > 1 else "", env[0] if env else None))
    return rows


ROWS = _table()


def test_the_table_is_there():
    assert len(ROWS) >= 250, "the 2026 flag table is missing or was not parsed"


def test_the_fixture_copy_matches_the_seed():
    """The table is copied into the repository so the test runs without ../shared."""
    if not _SEED.exists():
        pytest.skip("../shared/seeds is not beside this checkout; the copy is used")
    rows = [ln for ln in _SEED.read_text(encoding="utf-8").splitlines() if re.match(r"^\| `-", ln)]
    assert [ln for ln in _COPY.read_text(encoding="utf-8").splitlines() if re.match(r"^\| `-", ln)] == rows


@pytest.mark.parametrize("names,hint,env", ROWS, ids=[r[0][-1] for r in ROWS])
def test_every_flag_is_known_with_its_environment_variable(names, hint, env):
    opts = set()
    for n in names:
        assert n in _BY_NAME, f"{n}: not a llamars-server flag"
        opts.add(_BY_NAME[n][0])
    assert len(opts) == 1, f"{names}: spellings of one flag map to different options"
    o = opts.pop()
    if env and env != "HF_TOKEN":  # (HF_TOKEN is not read: many environments set it for other tools)
        assert o.env == env, f"{names[-1]}: environment variable {o.env} instead of {env}"


def _sample(o, name: str) -> list:
    """A command line giving flag `name` of option `o` a valid value."""
    k = o.kind
    if k in ("bool", "action"):
        return [name]
    value = {"int": "1", "threads": "2", "float": "0.5", "tristate": "on", "kvtype": "q8_0", "spectype": "ngram-simple",
             "choice": o.choices[0] if o.choices else "x", "ngl": "1", "pair": None, "bias": "15+1", "json": "{}", "mibs": "1024",
             "filescales": "x:0.5"}.get(k, "x")
    if k == "pair":
        return [name, "0", "1"]
    if o.dest == "tools":  # (a tool name is checked at parse time)
        value = "read_file"
    if o.lo is not None and k in ("int", "float") and float(value) < o.lo:
        value = str(int(o.lo))
    if o.hi is not None and k in ("int", "float") and float(value) > o.hi:
        value = str(o.hi)
    return [name, value]


CLASSES = {"implemented": 0, "inert": 0, "owned": 0, "removed": 0}


@pytest.mark.parametrize("names,hint,env", ROWS, ids=[r[0][-1] for r in ROWS])
def test_each_flag_starts_warns_or_is_refused_by_name(names, hint, env, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x").write_text("{}")  # a readable file for the flags that take one
    o, positive = _BY_NAME[names[-1]]
    name = next(n for n in names if _BY_NAME[n][1]) if any(_BY_NAME[n][1] for n in names) else names[-1]
    argv = _sample(o, name)
    if o.kind == "action":
        return  # --help, --version, -cl, --completion-bash, --list-devices act and exit
    if o.removed:
        with pytest.raises(CLIError, match="the argument has been removed"):
            _parse(argv, env={})
        return
    if o.owner:
        with pytest.raises(CLIError, match="is not available in llamars yet"):
            _parse(argv, env={})
        for neg in o.neg.split(","):
            if neg.strip():  # turning the missing feature off is fine
                c, _ = _parse([neg.strip()], env={})
                assert c.warnings == []
        return
    c, _ = _parse(argv, env={})
    if o.inert:
        assert c.warnings == [f"warning: {name} has no effect in llamars: {o.inert}"]
    else:
        assert [w for w in c.warnings if "--reasoning-budget" not in w] == []


def test_the_classes_are_what_the_notes_say():
    """A summary to keep the count honest: how many 2026 flags fall in each class."""
    seen = {}
    for names, _h, _e in ROWS:
        o = _BY_NAME[names[-1]][0]
        cls = "removed" if o.removed else "owned" if o.owner else "inert" if o.inert else "implemented"
        seen[id(o)] = cls
    counts = {k: sum(1 for v in seen.values() if v == k) for k in CLASSES}
    assert sum(counts.values()) == len(ROWS)
    print(counts)
    assert counts["removed"] == 5 and min(counts.values()) > 0


def test_owned_flags_that_ask_for_what_llamars_does_are_accepted():
    for argv in (["--spec-type", "none"], ["--no-rerank"] if "--no-rerank" in _BY_NAME else []):
        if argv:
            c, _ = _parse(argv, env={})
            assert c.warnings == []
    c, _ = _parse(["-ctk", "q8_0", "-ctv", "q4_0", "-fa", "on"], env={})
    assert (c.cache_type_k, c.cache_type_v, c.flash_attn, c.warnings) == ("q8_0", "q4_0", "on", [])
    with pytest.raises(CLIError, match="invalid value for -ctk"):
        _parse(["-ctk", "q7"], env={})


def test_removed_flags_are_refused_from_the_environment_too():
    with pytest.raises(CLIError, match="LLAMA_ARG_DRAFT_MAX.*removed. use --spec-draft-n-max"):
        _parse([], env={"LLAMA_ARG_DRAFT_MAX": "4"})


def test_warnings_are_printed_one_line_each_at_start(capsys, monkeypatch):
    import llamars.cli as cli

    monkeypatch.setattr("llamars.server.app.serve", lambda config: 0)
    assert cli.main(["-m", "/nonexistent.gguf", "--numa", "distribute", "--poll", "0", "-fa", "on", "--no-mmproj"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert [ln.split(":")[0] for ln in err] == ["warning", "warning"]
    assert err[0].startswith("warning: --poll has no effect in llamars")  # (in the table's order)
    assert err[1].startswith("warning: --numa has no effect in llamars")


def test_every_option_is_documented_with_its_class_in_help():
    from llamars.cli import help_text

    h = help_text()
    n_inert = sum(1 for o in OPTIONS if o.inert)
    assert h.count("llamars: accepted, no effect") == n_inert
