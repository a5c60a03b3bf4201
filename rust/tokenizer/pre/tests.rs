//! Hand-checked splits for every implemented preset (each expectation was worked
//! out from the preset's regexes by hand, not by running this code).
use super::*;

fn words<'a>(pre: &str, text: &'a str) -> Vec<&'a str> {
    let cfg = PreConfig::from_name(pre);
    let rules = cfg.rules.expect("implemented preset");
    let out: Vec<&str> = split(&rules, text).into_iter().map(|(a, b)| &text[a..b]).collect();
    assert_eq!(out.concat(), text, "words must tile the text");
    out
}

#[test]
fn gpt2() {
    assert_eq!(
        words("gpt-2", "Hello world's 123  x\n"),
        ["Hello", " world", "'s", " 123", " ", " x", "\n"]
    );
    // case-sensitive contractions; a lone apostrophe is punctuation
    assert_eq!(words("gpt-2", "I'M here'"), ["I", "'", "M", " here", "'"]);
    assert_eq!(words("gpt-2", "a\n\nb  "), ["a", "\n", "\n", "b", "  "]);
    assert_eq!(words("gpt-2", " ?! é"), [" ?!", " é"]);
}

#[test]
fn llama3() {
    assert_eq!(
        words("llama-bpe", "Hello world's 12345  x\n\n"),
        ["Hello", " world", "'s", " ", "123", "45", " ", " x", "\n\n"]
    );
    // case-insensitive contractions, any non-letter/digit/newline as a word's lead
    assert_eq!(words("llama3", "I'M (x)"), ["I", "'M", " (", "x", ")"]);
    assert_eq!(words("llama3", "a  \n  b"), ["a", "  \n", " ", " b"]);
    assert_eq!(words("llama3", "x.\n\ny"), ["x", ".\n\n", "y"]);
    assert_eq!(words("llama3", "\tfoo"), ["\tfoo"]);
}

#[test]
fn qwen2_splits_every_digit() {
    assert_eq!(words("qwen2", "abc 2024年"), ["abc", " ", "2", "0", "2", "4", "年"]);
    assert_eq!(words("qwen2", "Привет, мир!"), ["Привет", ",", " мир", "!"]);
}

#[test]
fn seed_coder_has_no_newline_tail() {
    assert_eq!(words("seed-coder", "x.\n\ny"), ["x", ".", "\n\n", "y"]);
}

#[test]
fn default_preset() {
    assert_eq!(
        words("default", "Hello, world! $100"),
        ["Hello", ",", " world", "!", " ", "$", "100"]
    );
    assert_eq!(words("default", "1234567"), ["123", "456", "7"]);
    // unknown names fall back to "default"
    assert_eq!(words("no-such-preset", "1234567"), ["123", "456", "7"]);
}

#[test]
fn starcoder_family() {
    assert_eq!(words("starcoder", "x=12;"), ["x", "=", "1", "2", ";"]);
    assert_eq!(words("smollm", "ab 12"), ["ab", " ", "1", "2"]);
}

#[test]
fn falcon() {
    assert_eq!(words("falcon", "a`b 1234"), ["a", "`", "b", " ", "123", "4"]);
}

#[test]
fn deepseek_llm() {
    assert_eq!(
        words("deepseek-llm", "Hello 世界 123\n"),
        ["Hello", " ", "世界", " ", "123", "\n"]
    );
    assert_eq!(words("deepseek-llm", "ok!!  "), ["ok", "!!", "  "]);
    // "\u{3000}。" survives the punctuation rule as one word, then the CJK range
    // (which spans U+3000) splits it: llama.cpp sees U+3000 there as U+000B
    assert_eq!(words("deepseek-llm", "a\u{3000}。"), ["a", "\u{3000}", "。"]);
}

#[test]
fn classes_without_categories_see_non_ascii_whitespace_as_vt() {
    // llama.cpp's std::wregex path replaces non-ASCII whitespace by U+000B, so
    // U+3000 falls out of the literal ranges that contain it
    let f = |c: char| unicode::flags(c);
    for class in [Class::DsPunct, Class::Cjk] {
        assert!(!class.has('\u{3000}', f('\u{3000}')), "{class:?}");
    }
    assert!(Class::DsPunct.has('\u{3001}', f('\u{3001}')));
    assert!(Class::Cjk.has('\u{3041}', f('\u{3041}')));
    assert!(!Class::Cjk.has('\u{2000}', f('\u{2000}')));
    assert!(Class::DsLetters.has('\u{1FBE}', f('\u{1FBE}')));
    assert!(Class::DsLetters.has('\u{3B9}', f('\u{3B9}'))); // in Σ-ϵ
    assert!(Class::DsLetters.has('\u{212A}', f('\u{212A}')));
    assert!(!Class::DsLetters.has('\u{1BB}', f('\u{1BB}')));
    assert!(!Class::NotBloomStop.has('\u{3000}', f('\u{3000}')));
    assert!(!Class::NotBloomStop.has('|', f('|')));
    assert!(Class::NotBloomStop.has('a', f('a')));
}

#[test]
fn deepseek_coder() {
    assert_eq!(words("deepseek-coder", "foo(bar) 42"), ["foo", "(", "bar", ")", " ", "4", "2"]);
}

#[test]
fn deepseek_v3() {
    assert_eq!(
        words("deepseek-v3", "Hello 123456 世界~x\n"),
        ["Hello", " ", "123", "456", " ", "世界", "~x", "\n"]
    );
    // ' ?[\p{P}\p{S}]+' takes the space and both tildes (checked against llama.cpp)
    assert_eq!(words("deepseek-v3", "a ~~b"), ["a", " ~~", "b"]);
    assert_eq!(words("deepseek-v3", "e\u{301}t"), ["e\u{301}t"]);
}

#[test]
fn bloom_and_viking() {
    assert_eq!(words("bloom", "Hello, world.(x)"), ["Hello", ",", " world", ".(", "x", ")"]);
    assert_eq!(words("viking", "ab 12"), ["ab", " ", "1", "2"]);
}

#[test]
fn empty_and_whitespace_only() {
    assert!(words("qwen2", "").is_empty());
    assert_eq!(words("qwen2", "   "), ["   "]);
    assert_eq!(words("gpt-2", "\u{3000}\u{3000}x"), ["\u{3000}", "\u{3000}", "x"]);
}

#[test]
fn preset_switches_follow_llama_cpp() {
    let l3 = PreConfig::from_name("llama-bpe");
    assert!(l3.ignore_merges && l3.add_bos && l3.clean_spaces);
    let dbrx = PreConfig::from_name("dbrx");
    assert!(!dbrx.ignore_merges && !dbrx.add_bos);
    let q = PreConfig::from_name("qwen2");
    assert!(!q.clean_spaces && !q.ignore_merges && !q.add_bos);
    assert!(PreConfig::from_name("megrez").clean_spaces);
    assert!(PreConfig::from_name("glm4").no_default_bos);
    assert_eq!(PreConfig::from_name("kimi-k2").rules, Err("kimi-k2"));
    assert_eq!(PreConfig::from_name("gpt-4o").rules, Ok(vec![Rule::CaseRuns { contractions: true, digits: 3 }]));
    let t = PreConfig::from_name("tekken");
    assert!(t.ignore_merges && t.add_bos && !t.clean_spaces);
    assert!(!PreConfig::from_name("llama4").clean_spaces);
}

#[test]
fn gpt4o_case_runs_and_contractions() {
    // U*L+ (a capital then lower case), U+L* (all capitals), non-ASCII letters in both
    // classes, contractions in any case, digits in threes, punctuation with its '/' tail
    assert_eq!(words("gpt-4o", "Hello WORLD ÄÖü aBc"), ["Hello", " WORLD", " ÄÖü", " a", "Bc"]);
    assert_eq!(words("gpt-4o", "it's I'M can't"), ["it's", " I'M", " can't"]);
    assert_eq!(words("gpt-4o", "x/y\n/z 12345"), ["x", "/y", "\n", "/z", " ", "123", "45"]);
    assert_eq!(words("gpt-4o", "HELLOworld Ñandú"), ["HELLOworld", " Ñandú"]);
    assert_eq!(words("gpt-4o", "a, b.//\n\n  c"), ["a", ",", " b", ".//\n\n", " ", " c"]);
    // Tekken: the same case runs, no contractions, single digits
    assert_eq!(words("tekken", "it's 123"), ["it", "'s", " ", "1", "2", "3"]);
}

#[test]
fn long_inputs_are_linear() {
    // a whitespace run is the worst case for `\s+$` and `\s+(?!\S)`
    let text = format!("{}x{}", " ".repeat(200_000), "\n ".repeat(50_000));
    for pre in ["default", "qwen2", "llama3", "deepseek-llm", "deepseek-v3", "bloom", "gpt-4o"] {
        let t = std::time::Instant::now();
        let w = words(pre, &text);
        assert!(!w.is_empty());
        assert!(t.elapsed().as_secs_f64() < 2.0, "{pre}: {:?}", t.elapsed());
    }
}
